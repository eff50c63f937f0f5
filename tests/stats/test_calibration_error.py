"""The binned ECE's debiased estimate matches the paper's package, and its interval covers the population ECE.

Coverage is simulated where the old percentile bootstrap of the plug-in failed (issue 31 point 5): a calibrated
model (population ECE 0, at the boundary) and mildly and clearly miscalibrated ones, at 300 and 1,000 rows.
The model: predictions uniform on [0, 1], labels true with probability 0.5 + shrink (p - 0.5). With ten
equal-width bins each bin's gap is -(1 - shrink)(midpoint - 0.5), so the population ECE is
(1 - shrink) * mean|midpoint - 0.5| = (1 - shrink) * 0.25 exactly: no estimate of the truth is involved.
"""

from __future__ import annotations

import numpy as np
import pytest

from gwlab.stats import calibration_error as ce

LEVEL = 0.95
SEEDS = 200  # simulated data sets per regime
# the coverage a valid 95 % interval can show over SEEDS data sets: 3 binomial standard errors below nominal
FLOOR = LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / SEEDS)
CEILING = LEVEL + 3 * np.sqrt(LEVEL * (1 - LEVEL) / SEEDS)  # "about nominal" where the bound is tight (ECE 0)


def _sample(rng: np.random.Generator, n: int, shrink: float) -> tuple[np.ndarray, np.ndarray]:
    p = rng.random(n)
    return p, (rng.random(n) < 0.5 + shrink * (p - 0.5)).astype(float)


def _population_ece(shrink: float) -> float:
    return (1 - shrink) * 0.25


def _interval(p: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, float]:
    return ce.interval(ce.binned(p, y), LEVEL, draws=4000, seed=seed)


def _percentile_bootstrap(p: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, float]:
    """The mutant: what gwlab shipped before, a percentile bootstrap of the plug-in ECE (400 resamples)."""
    rng = np.random.default_rng(seed)
    n, resamples = len(p), 400
    which = np.clip(np.searchsorted(np.linspace(0, 1, 11), p, side="right") - 1, 0, 9)
    drawn = rng.integers(0, n, size=(resamples, n))
    cell = (np.arange(resamples)[:, None] * 10 + which[drawn]).ravel()
    gap = np.bincount(cell, (y - p)[drawn].ravel(), resamples * 10).reshape(resamples, 10)
    values = np.abs(gap).sum(axis=1) / n  # sum_b (n_b / n) |mean gap_b|
    low, high = np.quantile(values, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(low), float(high)


def _coverage(method, n: int, shrink: float) -> float:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1000 + n)
    truth, hits = _population_ece(shrink), 0
    for seed in range(SEEDS):
        low, high = method(*_sample(rng, n, shrink), seed)
        hits += low <= truth <= high
    return hits / SEEDS


def _assert_covers(method, n: int, shrink: float) -> None:  # type: ignore[no-untyped-def]
    coverage = _coverage(method, n, shrink)
    assert coverage >= FLOOR, f"coverage {coverage:.3f} of the population ECE {_population_ece(shrink):.4f}"
    if shrink == 1.0:  # at ECE 0 the inequality behind the interval is an equality: nominal, not more
        assert coverage <= CEILING, f"coverage {coverage:.3f} at ECE 0 is above nominal: the bound is loose"


REGIMES = [(n, shrink) for n in (300, 1000) for shrink in (1.0, 0.85, 0.75)]


@pytest.mark.parametrize(("n", "shrink"), REGIMES)
def test_the_interval_covers_the_population_ece_at_its_level(n: int, shrink: float) -> None:
    _assert_covers(_interval, n, shrink)


@pytest.mark.parametrize(("n", "shrink"), [(300, 1.0), (1000, 1.0), (300, 0.85)])
def test_the_percentile_bootstrap_of_the_plugin_fails_the_same_coverage_check(n: int, shrink: float) -> None:
    with pytest.raises(AssertionError, match="coverage"):
        _assert_covers(_percentile_bootstrap, n, shrink)


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
