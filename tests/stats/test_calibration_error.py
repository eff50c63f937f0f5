"""The binned ECE's debiased estimate matches the paper's package, and its interval covers the population ECE.

Coverage is simulated where the old percentile bootstrap of the plug-in failed (issue 31 point 5): a calibrated
model (population ECE 0, at the boundary), mildly and clearly miscalibrated ones, at 300 and 1,000 rows
(bench/harness/coverage.py `calibration`: the population ECE is known exactly, (1 - shrink) * 0.25).
About nominal where the interval's bounds are tight (a calibrated model, a clearly miscalibrated one);
at least nominal where every bin's gap is within its noise (shrink 0.85, 0.75: conservative, see the
module's docstring and bench/ece_coverage.py). Two mutants fail the same check: the percentile
bootstrap gwlab shipped first (below nominal), and the union bound it shipped next (far above nominal
for a clearly miscalibrated model).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.harness.coverage import calibration, coverage, percentile_bootstrap_ece, union_bound_ece
from gwlab.stats import calibration_error as ce

LEVEL = 0.95
SEEDS = 200  # simulated data sets per regime
# the coverage a valid 95 % interval can show over SEEDS data sets: 3 binomial standard errors either side
FLOOR = LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / SEEDS)
CEILING = LEVEL + 3 * np.sqrt(LEVEL * (1 - LEVEL) / SEEDS)
TIGHT = (1.0, 0.0)  # calibrated, and clearly miscalibrated: where "about nominal" is asserted from above too


def _sample(rng: np.random.Generator, n: int, shrink: float) -> tuple[np.ndarray, np.ndarray]:
    p, y, _ = calibration(n, shrink)(rng, 0)[1]
    return p, y


def _interval(p: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, float]:
    return ce.interval(ce.binned(p, y), LEVEL, draws=4000, seed=seed)


def _assert_covers(method, n: int, shrink: float) -> None:  # type: ignore[no-untyped-def]
    rate = coverage(calibration(n, shrink), method, SEEDS, seed=1000 + n).rate
    assert rate >= FLOOR, f"coverage {rate:.3f} of the population ECE {(1 - shrink) * 0.25:.4f}"
    if shrink in TIGHT:
        assert rate <= CEILING, f"coverage {rate:.3f} at ECE {(1 - shrink) * 0.25:.4f} is above nominal"


REGIMES = [(n, shrink) for n in (300, 1000) for shrink in (1.0, 0.85, 0.75, 0.0)]


@pytest.mark.parametrize(("n", "shrink"), REGIMES)
def test_the_interval_covers_the_population_ece_at_its_level(n: int, shrink: float) -> None:
    _assert_covers(_interval, n, shrink)


@pytest.mark.parametrize(("n", "shrink"), [(300, 1.0), (1000, 1.0), (300, 0.85)])
def test_the_percentile_bootstrap_of_the_plugin_fails_the_same_coverage_check(n: int, shrink: float) -> None:
    with pytest.raises(AssertionError, match="coverage"):
        _assert_covers(percentile_bootstrap_ece, n, shrink)


@pytest.mark.parametrize("n", [300, 1000])
def test_the_union_bound_fails_the_same_check_for_a_clearly_miscalibrated_model(n: int) -> None:
    with pytest.raises(AssertionError, match="above nominal"):
        _assert_covers(union_bound_ece, n, 0.0)


def test_the_plugin_is_biased_upwards_and_the_debiased_estimate_less() -> None:
    rng = np.random.default_rng(5)
    plug, deb = [], []
    for _ in range(100):
        b = ce.binned(*_sample(rng, 300, 1.0))
        plug.append(ce.plugin(b))
        deb.append(ce.debiased(b))
    assert np.mean(plug) > 0.04  # a calibrated model "looks" 4+ points miscalibrated
    assert np.mean(deb) < 0.75 * np.mean(plug)  # Kumar et al.'s correction removes part of the bias


def _reference_binned(p: np.ndarray, y: np.ndarray) -> list[list[tuple[float, float]]]:
    which = np.clip(np.searchsorted(np.linspace(0, 1, 11), p, side="right") - 1, 0, 9)
    return [[(float(a), float(b)) for a, b in zip(p[which == k], y[which == k], strict=True)]
            for k in range(10) if np.any(which == k)]


@pytest.mark.parametrize("shrink", [1.0, 0.75])
def test_the_estimates_equal_kumar_et_al_s_package_on_the_same_bins(shrink: float) -> None:
    calibration = pytest.importorskip("calibration")  # PyPI uncertainty-calibration (Kumar, Liang & Ma 2019)
    p, y = _sample(np.random.default_rng(11), 1000, shrink)
    b = ce.binned(p, y)
    data = _reference_binned(p, y)
    assert ce.plugin(b) == pytest.approx(calibration.plugin_ce(data, power=1), abs=1e-12)
    np.random.seed(0)  # the package draws its normals from numpy's global generator
    reference = calibration.normal_debiased_ce(data, power=1, resamples=20_000)
    assert ce.debiased(b) == pytest.approx(reference, abs=1e-3)  # their Monte Carlo, our closed form


def test_degenerate_samples_give_finite_or_nan_figures_never_an_error() -> None:
    empty = ce.binned(np.zeros(0), np.zeros(0))
    assert np.isnan(ce.plugin(empty)) and np.isnan(ce.debiased(empty)) and np.isnan(ce.interval(empty)[0])
    one = ce.binned(np.array([0.9]), np.array([1.0]))  # one row: its gap is all there is
    assert ce.plugin(one) == pytest.approx(0.1) and ce.debiased(one) == pytest.approx(0.1)
    low, high = ce.interval(one)
    assert low <= 0.1 <= high
    sure = ce.binned(np.ones(50), np.ones(50))  # certain and right: no noise, ECE 0 with a zero-width interval
    assert ce.plugin(sure) == 0 and ce.interval(sure) == (0.0, 0.0)
    same_bin = ce.binned(np.full(40, 0.55), np.r_[np.ones(22), np.zeros(18)])
    assert ce.plugin(same_bin) == pytest.approx(0.0) and ce.interval(same_bin)[0] == 0.0
