"""PPI++ means checked against `ppi_py` on the same data, statsmodels' cluster-robust mean, and seeded
coverage simulations at their hardest regime (a biased model, small labelled sets) beside a broken
mutant (the model-only share's interval) that must fail them.

`ppi_py` (PyPI `ppi-python`) needs numba, whose numpy pin would decide the venv's numpy, so it lives in a
side venv that `make ppi-ref` builds (.venv-ppi, pinned by tests/stats/requirements-ppi.txt; `make test`
builds it first) and runs as a subprocess on the same data. `make test` names it in GWLAB_PPI_PYTHON, and
then a missing reference fails; a bare pytest run without .venv-ppi skips the reference test, saying so.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.harness.coverage import (
    conversations,
    coverage,
    drawn_labels,
    few_labels,
    ipw_interval,
    labels_only_interval,
    ppi_interval,
)
from gwlab.stats.ppi import hajek_mean, ipw_mean, ppi_mean, t_quantile, tuned_lambda

_REQUIRED = os.environ.get("GWLAB_PPI_PYTHON")
_SIDE = _REQUIRED or str(Path(__file__).resolve().parents[2] / ".venv-ppi" / "bin" / "python")

_REFERENCE = """
import json, sys
import numpy as np
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.ppi import _calc_lam_glm
cases = json.load(open(sys.argv[1]))
out = []
for c in cases:
    y, yh, yu = (np.array(c[k], dtype=float) for k in ("y", "yhat", "yu"))
    lam = c["lam"]
    low, high = ppi_mean_ci(y, yh, yu, alpha=0.05, lam=lam)
    est = ppi_mean_pointestimate(y, yh, yu, lam=lam)
    out.append([float(np.ravel(est)[0]), float(np.ravel(low)[0]), float(np.ravel(high)[0])])
print(json.dumps(out))
"""


def _cases() -> list[dict]:
    rng = np.random.default_rng(7)
    cases = []
    for n, big_n, bias, lam in [(50, 2000, 0.1, None), (200, 5000, -0.2, None), (30, 300, 0.0, 1.0),
                                (80, 1000, 0.15, 0.0), (40, 500, 0.3, None)]:
        truth = rng.random(n + big_n) < 0.3
        p = np.clip(np.where(truth, 0.7, 0.2) + bias + rng.normal(0, 0.1, n + big_n), 0, 1)
        cases.append({"y": truth[:n].astype(float).tolist(), "yhat": p[:n].tolist(), "yu": p[n:].tolist(),
                      "lam": lam})
    # degenerate: every label the same; a model that says the same thing on every row
    cases.append({"y": [0.0] * 20, "yhat": rng.random(20).tolist(), "yu": rng.random(200).tolist(), "lam": None})
    cases.append({"y": ([1.0, 0.0] * 15), "yhat": [0.4] * 30, "yu": [0.4] * 300, "lam": None})
    return cases


def _reference(cases: list[dict], tmp_path: Path) -> list[list[float]]:
    """`ppi_py`'s estimate and 95 % interval per case, from this interpreter or the side venv's."""
    python = sys.executable if importlib.util.find_spec("ppi_py") else _SIDE
    if not Path(python).exists():
        assert not _REQUIRED, f"GWLAB_PPI_PYTHON={_REQUIRED} does not exist (make ppi-ref)"
        pytest.skip(f"ppi_py not importable and no side venv at {_SIDE} (make ppi-ref)")
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "ref.py").write_text(_REFERENCE)
    done = subprocess.run([python, str(tmp_path / "ref.py"), str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "No module named 'ppi_py'" in done.stderr and not _REQUIRED:
        pytest.skip(f"{python} has no ppi_py (make ppi-ref)")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_ppi_mean_matches_ppi_py_on_the_same_data_degenerate_samples_included(tmp_path: Path) -> None:
    cases = _cases()
    reference = _reference(cases, tmp_path)
    for case, (est, low, high) in zip(cases, reference, strict=True):
        got = ppi_mean(np.array(case["y"]), np.array(case["yhat"]), np.array(case["yu"]), lam=case["lam"],
                       small_sample=False)
        assert got.estimate == pytest.approx(est, abs=1e-9)
        assert got.low == pytest.approx(low, abs=1e-9)
        assert got.high == pytest.approx(high, abs=1e-9)


def test_lambda_zero_is_the_classical_mean_and_its_t_interval() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    y = (rng.random(60) < 0.4).astype(float)
    got = ppi_mean(y, rng.random(60), rng.random(600), lam=0.0)
    low, high = stats.t.interval(0.95, 59, loc=y.mean(), scale=stats.sem(y))
    assert (got.estimate, got.low, got.high) == pytest.approx((y.mean(), low, high), abs=2e-4)


def test_t_quantile_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for level in (0.8, 0.9, 0.95, 0.99):
        for df in (3, 5, 11, 29, 100, 1000):
            exact = stats.t.ppf(0.5 + level / 2, df)
            assert t_quantile(level, df) == pytest.approx(exact, rel=1e-2 if df < 5 else 1e-3)


def test_tuned_lambda_is_near_one_for_a_perfect_model_and_zero_for_noise() -> None:
    rng = np.random.default_rng(2)
    y = (rng.random(3000) < 0.3).astype(float)
    assert 0.85 < tuned_lambda(y[:300], y[:300], y[300:]) <= 1.0  # cov/var = 1, shrunk by 1/(1 + n/N) = 0.9
    assert tuned_lambda(y[:300], rng.random(300), rng.random(2700)) < 0.15


def test_cluster_variance_of_the_labelled_mean_matches_statsmodels_cluster_robust() -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(25), 4)
    y = (rng.random(100) < 0.2 + 0.4 * (groups % 2)).astype(float)
    got = ppi_mean(y, rng.random(100), np.zeros(0), clusters=groups, clusters_unlabelled=np.zeros(0))  # lam 0
    fit = sm.OLS(y, np.ones((100, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-9)


SMALL = few_labels((30, 50, 80))  # a model that overstates the share by 0.15, 30-80 labels beside 2,000 answers


def test_ppi_interval_covers_at_nominal_with_a_biased_model_and_few_labels() -> None:
    for lam in (None, 1.0):
        assert (covered := coverage(SMALL, ppi_interval(lam), 600, seed=11).rate) >= 0.93, (lam, covered)


def test_model_only_interval_mutant_fails_the_same_coverage_check() -> None:
    def model_only(y: np.ndarray, h: np.ndarray, u: np.ndarray) -> tuple[float, float]:
        every = np.concatenate([h, u])
        half = 1.96 * every.std() / math.sqrt(len(every))
        return every.mean() - half, every.mean() + half

    assert coverage(SMALL, model_only, 600, seed=11).rate < 0.5


def test_clustered_interval_covers_when_rows_share_clusters() -> None:
    """24 whole conversations labelled (120 rows). With 12 the clustered interval covers 0.91: below ~20
    labelled clusters the normal approximation is too short (docs/guide/labels.md says so, `estimate` warns)."""
    assert coverage(conversations(24), ppi_interval(None), 500, seed=5).rate >= 0.93


def test_row_wise_interval_mutant_fails_when_rows_share_clusters() -> None:
    assert coverage(conversations(24), ppi_interval(None, clustered=False), 500, seed=5).rate < 0.85


def test_ipw_interval_covers_with_labels_drawn_towards_uncertain_rows() -> None:
    assert coverage(drawn_labels(60), ipw_interval, 500, seed=9).rate >= 0.93


def test_ipw_refuses_a_row_that_could_not_be_labelled() -> None:
    with pytest.raises(ValueError, match="pi"):
        ipw_mean(np.array([1.0, np.nan]), np.array([0.5, 0.5]), np.array([1.0, 0.0]))


def test_one_label_has_no_interval() -> None:
    r = ppi_mean(np.array([1.0]), np.array([0.8]), np.array([0.2, 0.4]))
    assert r.estimate == r.estimate and math.isnan(r.low)


def _drawn_at_low_rates(rng: np.random.Generator, labels: int = 8, share: float = 0.02
                        ) -> tuple[np.ndarray, np.ndarray]:
    """A `share` over 2,000 rows, about `labels` rows labelled with probabilities spread over 100x."""
    truth = (rng.random(2000) < share).astype(float)
    pi = np.clip(rng.uniform(0.1, 10, 2000) * labels / 2000 / 5.05, 1e-4, 1)
    return np.where(rng.random(2000) < pi, truth, np.nan), pi


def test_hajek_mean_and_se_match_statsmodels_weighted_least_squares_hc1() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(12)
    for y, pi in [_drawn_at_low_rates(rng, 40), _drawn_at_low_rates(rng, 8),
                  (np.array([1.0, 1.0, np.nan, 1.0]), np.array([0.2, 0.5, 0.3, 0.9])),  # every label alike
                  (np.array([0.0, 1.0, np.nan, 3.0, 2.0]), np.array([0.01, 0.5, 0.3, 0.9, 1.0]))]:
        got, xi = hajek_mean(y, pi), ~np.isnan(y)
        fit = sm.WLS(y[xi], np.ones(int(xi.sum())), weights=1 / pi[xi]).fit(cov_type="HC1")
        assert got.estimate == pytest.approx(float(fit.params[0]), rel=1e-12)
        assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-9, abs=1e-15)


def test_hajek_share_stays_inside_the_labels_range_where_horvitz_thompson_leaves_it() -> None:
    rng = np.random.default_rng(3)
    beyond = 0
    for share in (0.02, 0.5, 0.9) * 100:
        y, pi = _drawn_at_low_rates(rng, 5, share)
        if np.isnan(y).all():
            continue
        assert 0.0 <= hajek_mean(y, pi).estimate <= 1.0
        beyond += not 0.0 <= ipw_mean(y, np.zeros_like(pi), pi, lam=0.0).estimate <= 1.0
    assert beyond > 0  # the case the ratio form is for: the lam = 0 IPW share read above 1


def test_hajek_interval_covers_with_a_few_labels_drawn_at_uneven_rates() -> None:
    """About 60 labels drawn towards the model's uncertain rows (probabilities 0.02-1): coverage >= 0.93."""
    assert coverage(drawn_labels(60), labels_only_interval, 500, seed=9).rate >= 0.93


def test_hajek_interval_mutant_with_unweighted_residuals_fails_the_same_coverage_check() -> None:
    def unweighted_se(y: np.ndarray, p: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
        r, labels = hajek_mean(y, pi), y[~np.isnan(y)]
        half = t_quantile(0.95, len(labels) - 1) * labels.std(ddof=1) / math.sqrt(len(labels)) / 3
        return r.estimate - half, r.estimate + half

    assert coverage(drawn_labels(60), unweighted_se, 500, seed=9).rate < 0.85
