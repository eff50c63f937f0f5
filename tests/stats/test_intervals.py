"""gwlab's intervals and tests against reference implementations (statsmodels, scipy) on the same data.

The references are test-only: gwlab computes in plain numpy. Bootstrap endpoints are compared with a
tolerance, since the two resample differently; closed-form intervals and exact tests to 1e-6.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

import gwlab
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation import evidence
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.targets import resolve
from gwlab.stats import intervals, metrics

# (successes, trials), small and degenerate included: one row, all wrong, all right
COUNTS = [(0, 1), (1, 1), (0, 20), (20, 20), (1, 2), (7, 40), (227, 312), (50_000, 100_000)]


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
@pytest.mark.parametrize(("k", "n"), COUNTS)
def test_wilson_interval_matches_statsmodels(k: int, n: int, level: float) -> None:
    low, high = intervals.wilson(k, n, level)
    ref = proportion_confint(k, n, alpha=1 - level, method="wilson")
    assert (float(low), float(high)) == pytest.approx(ref, abs=1e-7)


@pytest.mark.parametrize(("k", "n"), COUNTS[:-1])
def test_clopper_pearson_interval_matches_statsmodels_beta(k: int, n: int) -> None:
    assert intervals.clopper_pearson(k, n, 0.95) == pytest.approx(
        proportion_confint(k, n, alpha=0.05, method="beta"), abs=1e-7)


@pytest.mark.parametrize(("k", "n", "p"), [(0, 5, 0.5), (3, 10, 0.3), (10, 10, 0.2), (140, 312, 0.45)])
def test_binomial_cdf_matches_scipy(k: int, n: int, p: float) -> None:
    assert intervals.binom_cdf(k, n, p)[0] == pytest.approx(stats.binom.cdf(k, n, p), rel=1e-9)


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (0, 5), (3, 3), (1, 9), (12, 30), (400, 460)])
def test_exact_mcnemar_matches_statsmodels_and_scipy_binomtest(a_only: int, b_only: int) -> None:
    p = intervals.mcnemar_exact(a_only, b_only)
    assert p == pytest.approx(mcnemar([[10, a_only], [b_only, 10]], exact=True).pvalue, abs=1e-9)
    if a_only + b_only:
        assert p == pytest.approx(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue, abs=1e-9)


def test_holm_matches_statsmodels_with_ties_and_leaves_nan_out() -> None:
    p = np.array([0.01, 0.04, 0.04, 0.3, np.nan, 0.002])
    ok = ~np.isnan(p)
    expected = multipletests(p[ok], method="holm")[1]
    adjusted = intervals.holm(p)
    assert adjusted[ok] == pytest.approx(expected) and np.isnan(adjusted[4])


def test_wilson_coverage_is_within_two_points_of_the_nominal_level() -> None:
    """20,000 synthetic samples per case (seeded): coverage of the true accuracy, Monte Carlo error ~0.2 pt."""
    rng = np.random.default_rng(0)
    for p_true, n in [(0.7, 40), (0.9, 100), (0.5, 312)]:
        k = rng.binomial(n, p_true, size=20_000)
        low, high = intervals.wilson(k, n, 0.95)
        coverage = np.mean((low <= p_true) & (p_true <= high))
        assert abs(coverage - 0.95) < 0.02, (p_true, n, coverage)


def _noisy(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    return pd.DataFrame({"label": rng.uniform(size=n) < p, "urgent__noul": np.clip(p + rng.normal(0, .2, n), 0, 1)})


def test_bootstrap_interval_of_brier_agrees_with_scipy_percentile_bootstrap() -> None:
    frame = _noisy(400)
    m = gwlab.evaluate(frame, truth="label", prob="urgent").metrics.loc["urgent"]
    per_row = (frame["urgent__noul"] - frame["label"]) ** 2
    ref = stats.bootstrap((per_row.to_numpy(),), np.mean, n_resamples=5000, method="percentile",
                          confidence_level=0.95, random_state=1).confidence_interval
    assert (m["brier_low"], m["brier_high"]) == pytest.approx((ref.low, ref.high), abs=0.004)


def test_bootstrap_interval_of_kappa_agrees_with_scipy_paired_bootstrap() -> None:
    frame = _noisy(300)
    m = gwlab.evaluate(frame, truth="label", prob="urgent").metrics.loc["urgent"]
    y, said = frame["label"].to_numpy(int), (frame["urgent__noul"] >= 0.5).to_numpy(int)
    ref = stats.bootstrap((y, said), metrics.cohen_kappa, paired=True, vectorized=False, n_resamples=2000,
                          method="percentile", random_state=1).confidence_interval
    assert m["kappa_low"] <= m["kappa"] <= m["kappa_high"]
    assert (m["kappa_low"], m["kappa_high"]) == pytest.approx((ref.low, ref.high), abs=0.02)


@pytest.mark.parametrize("question", ["urgent", "team", "severity"])
def test_metrics_from_weighted_sums_at_weight_one_equal_the_point_estimates(question: str) -> None:
    rng = np.random.default_rng(5)
    n = 200
    team = rng.dirichlet([1, 1, 1], n)
    frame = pd.DataFrame({"u": rng.uniform(size=n) < 0.4, "urgent__noul": rng.uniform(size=n),
                          "t": rng.choice(["a", "b", "c"], n), "s": rng.integers(0, 3, n),
                          **{f"team__p__{o}": team[:, i] for i, o in enumerate("abc")},
                          **{f"severity__p__{i}": team[:, i] for i in range(3)}})
    truth = {"urgent": "u", "team": "t", "severity": "s"}
    point = gwlab.evaluate(frame, truth={question: truth[question]}).metrics.loc[question]
    (target,) = resolve(frame, {question: truth[question]})
    sums = evidence.target_sums(target, 10)
    for name, value in sums.point().items():
        assert value == pytest.approx(point[name], abs=1e-12), name


def test_resampling_draws_counts_in_chunks_never_a_full_index_matrix() -> None:
    chunks = list(intervals.resample_counts(50_000, resamples=1000, seed=0))
    assert sum(len(c) for c in chunks) == 1000
    assert max(c.size for c in chunks) <= 10_000_000  # 100 resamples x 50,000 rows at most, not 1,000 x 50,000
    assert all((c.sum(axis=1) == 50_000).all() for c in chunks)


def test_the_same_seed_gives_the_same_interval_and_the_method_is_named() -> None:
    frame = _noisy(120)
    one, two = (gwlab.evaluate(frame, truth="label", prob="urgent", seed=7) for _ in range(2))
    pd.testing.assert_frame_equal(one.metrics, two.metrics)
    assert one.methods["accuracy"] == "Wilson score"
    assert one.methods["kappa"] == "percentile bootstrap over rows (1000 resamples, seed 7)"
    assert one.methods["ece"].startswith("plug-in +/- ")  # a bootstrap of the binned ECE never covers 0


def test_every_metric_has_low_and_high_columns_around_the_estimate_and_the_repr_shows_them() -> None:
    result = gwlab.evaluate(_noisy(200), truth="label", prob="urgent", level=0.9)
    m = result.metrics.loc["urgent"]
    for name in ("accuracy", "macro_f1", "kappa", "brier", "log_loss"):
        assert m[f"{name}_low"] <= m[name] <= m[f"{name}_high"], name
    assert {"ece_low", "ece_high", "mae_low", "mae_high"} <= set(result.metrics.columns)
    assert f"{m['accuracy']:.3f} [{m['accuracy_low']:.3f}, {m['accuracy_high']:.3f}]" in repr(result)
    assert "90% intervals" in repr(result) and result.level == 0.9


def test_a_level_outside_zero_and_one_fails_naming_level() -> None:
    with pytest.raises(InvalidRequest) as raised:
        gwlab.evaluate(_noisy(20), truth="label", prob="urgent", level=95)
    assert raised.value.field == "level"


def test_all_right_all_wrong_and_one_row_give_intervals_with_a_small_sample_warning() -> None:
    frame = pd.DataFrame({"label": [True, False, True], "urgent__noul": [0.9, 0.1, 0.8]})
    with pytest.warns(EvaluationWarning, match=r"fewer than 10 rows.*'urgent' \(n=3\)"):
        m = gwlab.evaluate(frame, truth="label", prob="urgent").metrics.loc["urgent"]
    assert m["small"] and m["accuracy"] == 1.0
    assert (m["accuracy_low"], m["accuracy_high"]) == pytest.approx(proportion_confint(3, 3, method="wilson"))
    with pytest.warns(EvaluationWarning):
        wrong = gwlab.evaluate(frame.assign(label=~frame["label"]), truth="label", prob="urgent").metrics
    assert wrong.loc["urgent", "accuracy_low"] == 0.0 and wrong.loc["urgent", "accuracy_high"] < 0.6
    with pytest.warns(EvaluationWarning):
        one = gwlab.evaluate(frame.iloc[:1], truth="label", prob="urgent").metrics.loc["urgent"]
    assert one["n"] == 1 and one["accuracy_low"] < 0.3 and one["brier_low"] == pytest.approx(0.01)


def test_enough_rows_give_no_small_sample_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvaluationWarning)
        assert not gwlab.evaluate(_noisy(10), truth="label", prob="urgent").metrics["small"].any()


def test_reliability_bins_carry_counts_and_a_wilson_interval_on_the_observed_rate() -> None:
    table = gwlab.evaluate(_noisy(200), truth="label", prob="urgent").reliability["urgent"]
    used = table[table["count"] > 0]
    k = np.round(used["observed"] * used["count"]).astype(int)
    ref = np.array([proportion_confint(a, b, method="wilson") for a, b in zip(k, used["count"], strict=True)])
    assert used[["observed_low", "observed_high"]].to_numpy() == pytest.approx(ref, abs=1e-9)
    assert table.loc[table["count"] == 0, "observed_low"].isna().all()


def _channels() -> pd.DataFrame:
    frame = _noisy(130)
    frame["kind"] = ["chat"] * 60 + ["mail"] * 64 + ["fax"] * 6
    frame["tier"] = ["gold", "free"] * 65
    return frame


def test_slices_by_a_column_give_every_metric_per_slice_with_count_and_flag_small_ones() -> None:
    frame = _channels()
    with pytest.warns(EvaluationWarning, match=r"\('urgent', 'fax'\) \(n=6\)"):
        table = gwlab.evaluate(frame, truth={"urgent": "label"}, by="kind").metrics
    assert list(table.index.names) == ["question", "kind"]
    assert list(table.index) == [("urgent", "chat"), ("urgent", "fax"), ("urgent", "mail")]
    assert list(table["n"]) == [60, 6, 64] and list(table["small"]) == [False, True, False]
    chat = frame[frame["kind"] == "chat"]
    alone = gwlab.evaluate(chat, truth="label", prob="urgent").metrics.loc["urgent"]
    assert table.loc[("urgent", "chat"), "kappa_high"] == pytest.approx(alone["kappa_high"])


def test_slices_by_several_columns_and_an_unknown_column_is_named() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        table = gwlab.evaluate(_channels(), truth="label", prob="urgent", by=["kind", "tier"]).metrics
    assert list(table.index.names) == ["question", "kind", "tier"] and table["n"].sum() == 130
    with pytest.raises(InvalidRequest) as raised:
        gwlab.evaluate(_channels(), truth="label", prob="urgent", by="channel")
    assert raised.value.field == "by"


def test_a_slice_where_a_question_has_no_labelled_row_has_n_zero_and_is_flagged() -> None:
    frame = _channels().assign(refund=lambda f: f["label"].where(f["kind"] != "fax"),
                               refund__noul=lambda f: f["urgent__noul"])
    with pytest.warns(EvaluationWarning, match=r"\('refund', 'fax'\) \(n=0\)"):
        table = gwlab.evaluate(frame, truth={"urgent": "label", "refund": "refund"}, by="kind").metrics
    assert table.loc[("refund", "fax"), "n"] == 0 and table.loc[("refund", "fax"), "small"]
    assert np.isnan(table.loc[("refund", "fax"), "accuracy_low"])
    assert table.loc[("urgent", "fax"), "n"] == 6


def test_cluster_bootstrap_sums_are_the_sums_of_the_drawn_clusters_rows() -> None:
    """Hand-rolled: each resample draws clusters (`resample_counts` over the clusters) and sums the rows
    of every drawn cluster as often as it was drawn."""
    rng = np.random.default_rng(3)
    clusters = np.array([0, 0, 1, 2, 2, 2, 3])
    columns = rng.normal(size=(len(clusters), 2))
    got = intervals.bootstrap_sums(columns, resamples=50, seed=5, clusters=clusters)
    (drawn,) = list(intervals.resample_counts(4, resamples=50, seed=5))
    want = np.array([[sum(drawn[r, clusters[i]] * columns[i] for i in range(len(clusters)))[j] for j in range(2)]
                     for r in range(50)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_cluster_per_row_is_the_plain_row_bootstrap() -> None:
    columns = np.random.default_rng(4).normal(size=(30, 3))
    plain = intervals.bootstrap_sums(columns, resamples=200, seed=2)
    np.testing.assert_array_equal(intervals.bootstrap_sums(columns, 200, 2, clusters=np.arange(30)), plain)
