"""gwlab.compare: paired differences, exact McNemar, paired bootstrap, Holm, flips, one-sided rows, verdict."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from tests.support.tickets import QUESTIONS, tickets_frame

COLUMNS = ["n", "a", "b", "diff", "diff_low", "diff_high", "p_value", "p_adjusted", "method"]


def _pair(n: int = 200, better: float = 0.0, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Two noul answer frames on the same rows; B's probabilities moved towards the truth by `better`."""
    rng = np.random.default_rng(seed)
    truth = pd.Series(rng.uniform(size=n) < 0.5, index=pd.RangeIndex(1000, 1000 + n, name="id"))
    p_a = np.clip(np.where(truth, 0.6, 0.4) + rng.normal(0, 0.25, n), 0, 1)
    p_b = np.clip(p_a + better * np.where(truth, 1, -1) + rng.normal(0, 0.05, n), 0, 1)
    return (pd.DataFrame({"urgent__noul": p_a}, index=truth.index),
            pd.DataFrame({"urgent__noul": p_b}, index=truth.index), truth)


def test_table_has_one_row_per_question_and_metric_with_the_documented_columns() -> None:
    a, b, truth = _pair()
    table = gwlab.compare(a, b, truth=truth).table
    assert list(table.columns) == COLUMNS
    assert list(table.index.names) == ["question", "metric"]
    assert list(table.xs("urgent").index) == ["accuracy", "macro_f1", "kappa", "brier", "log_loss", "ece"]
    row = table.loc[("urgent", "brier")]
    assert row["diff"] == pytest.approx(row["b"] - row["a"])
    assert row["diff_low"] <= row["diff"] <= row["diff_high"]


def test_accuracy_p_value_is_the_exact_mcnemar_of_statsmodels_on_the_same_rows() -> None:
    a, b, truth = _pair(better=0.05)
    right_a, right_b = (a["urgent__noul"] >= 0.5) == truth, (b["urgent__noul"] >= 0.5) == truth
    crosstab = pd.crosstab(right_a, right_b).reindex(index=[True, False], columns=[True, False], fill_value=0)
    row = gwlab.compare(a, b, truth=truth).table.loc[("urgent", "accuracy")]
    assert row["p_value"] == pytest.approx(mcnemar(crosstab.to_numpy(), exact=True).pvalue, abs=1e-12)
    assert row["method"].startswith("McNemar exact")


def test_paired_bootstrap_interval_of_the_brier_difference_agrees_with_scipy() -> None:
    a, b, truth = _pair(n=300, better=0.03)
    row = gwlab.compare(a, b, truth=truth).table.loc[("urgent", "brier")]
    y = truth.to_numpy(float)
    per_row = ((b["urgent__noul"] - y) ** 2 - (a["urgent__noul"] - y) ** 2).to_numpy()
    ref = stats.bootstrap((per_row,), np.mean, n_resamples=5000, method="percentile",
                          random_state=2).confidence_interval
    assert (row["diff_low"], row["diff_high"]) == pytest.approx((ref.low, ref.high), abs=0.002)


def test_holm_adjusts_across_every_question_and_metric_the_verdict_covers() -> None:
    a, b, truth = _pair(better=0.04)
    a2, b2, truth2 = _pair(better=0.0, seed=1)
    both_a = a.join(a2.rename(columns={"urgent__noul": "refund__noul"}))
    both_b = b.join(b2.rename(columns={"urgent__noul": "refund__noul"}))
    table = gwlab.compare(both_a, both_b, truth={"urgent": truth, "refund": truth2}).table
    assert len(table) == 12
    assert table["p_adjusted"].to_numpy() == pytest.approx(
        multipletests(table["p_value"].to_numpy(), method="holm")[1])


def _scores(labels: list[int], seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Two score answer frames over levels 0..4, A right on every row and B one level off."""
    truth = pd.Series(labels, index=pd.RangeIndex(len(labels)), name="stars")
    level = np.array(labels) - 1  # the labels are 1-based: level = label - 1
    def side(shift: int) -> pd.DataFrame:
        chosen = np.clip(level + shift, 0, 4)
        out = pd.DataFrame({f"mood__p__{k}": np.where(chosen == k, 0.8, 0.05) for k in range(5)}, index=truth.index)
        return out.assign(mood__score=chosen.astype(float))
    return side(0), side(1), truth


def test_compare_takes_levels_from_and_warns_on_a_slice_that_fits_both_scales() -> None:
    """Issue 31 (c): a 2..4 slice of a 1..5 scale was read as 0-based without evaluate's warning."""
    a, b, truth = _scores([2, 3, 4] * 10)
    with pytest.warns(EvaluationWarning, match="fit both") as said:
        unstated = gwlab.compare(a, b, truth=truth, resamples=100).table.loc[("mood", "accuracy")]
    assert sum("fit both" in str(w.message) for w in said) == 1  # said once, not once per side
    assert unstated["a"] == 0.0  # read as 0-based, as the warning says
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvaluationWarning)
        stated = gwlab.compare(a, b, truth=truth, resamples=100, levels_from=1).table.loc[("mood", "accuracy")]
    assert (stated["a"], stated["b"]) == (1.0, 0.0) and stated["diff"] == -1.0


def test_compare_maps_label_synonyms() -> None:
    a, b, truth = _pair()
    coded = truth.map({True: 2, False: 1})
    with pytest.raises(InvalidRequest, match="1, 2"):
        gwlab.compare(a, b, truth=coded)
    mapped = gwlab.compare(a, b, truth=coded, labels={1: False, 2: True}).table
    assert mapped["a"].to_numpy() == pytest.approx(gwlab.compare(a, b, truth=truth).table["a"].to_numpy())


def test_flips_list_each_row_that_changed_with_its_direction() -> None:
    index = pd.Index(["m1", "m2", "m3", "m4"], name="id")
    truth = pd.Series(["x", "y", "x", "y"], index=index)
    a = pd.Series(["x", "x", "x", "y"], index=index, name="team")
    b = pd.Series(["y", "y", "x", "y"], index=index, name="team")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        result = gwlab.compare(a, b, truth=truth)
    assert list(result.flips.index) == ["m1", "m2"]
    assert list(result.flips["change"]) == ["right→wrong", "wrong→right"]
    assert list(result.flips["a"]) == ["x", "x"] and list(result.flips["b"]) == ["y", "y"]


def test_identical_answers_have_no_discordant_pair_p_one_and_no_winner() -> None:
    a, _, truth = _pair()
    result = gwlab.compare(a, a.copy(), truth=truth)
    acc = result.table.loc[("urgent", "accuracy")]
    assert (acc["diff"], acc["p_value"], acc["diff_low"], acc["diff_high"]) == (0.0, 1.0, 0.0, 0.0)
    assert result.flips.empty
    assert "no significant difference" in result.verdict


def test_rows_in_one_side_only_are_reported_and_warned_not_silently_dropped() -> None:
    a, b, truth = _pair()
    with pytest.warns(EvaluationWarning, match="3 only in a, 0 only in b"):
        result = gwlab.compare(a, b.iloc[3:], truth=truth)
    assert list(result.only_a) == list(a.index[:3]) and result.only_b.empty
    assert result.table.loc[("urgent", "accuracy"), "n"] == len(a) - 3
    assert "not compared: 3 rows only in a" in result.verdict


def test_a_clear_improvement_is_called_and_a_small_one_is_not() -> None:
    a, b, truth = _pair(n=400, better=0.3)
    clear = gwlab.compare(a, b, truth=truth)
    assert clear.table.loc[("urgent", "accuracy"), "p_adjusted"] < 0.05
    assert "urgent: B is more accurate" in clear.verdict
    a, b, truth = _pair(n=40, better=0.02)
    small = gwlab.compare(a, b, truth=truth)
    assert small.table.loc[("urgent", "accuracy"), "p_adjusted"] >= 0.05
    assert "no significant difference in accuracy, neither is shown better" in small.verdict
    assert "more accurate" not in small.verdict


def test_bad_sides_and_ambiguous_truth_fail_naming_the_field() -> None:
    a, b, truth = _pair()
    with pytest.raises(InvalidRequest) as raised:
        gwlab.compare([0.1, 0.2], b, truth=truth)
    assert raised.value.field == "a"
    with pytest.raises(InvalidRequest) as raised:
        gwlab.compare(a, pd.concat([b, b]), truth=truth)
    assert raised.value.field == "b"
    two = a.assign(refund__noul=0.5)
    with pytest.raises(InvalidRequest, match="2 questions") as raised:
        gwlab.compare(two, two, truth=truth)
    assert raised.value.field == "truth"


@pytest.mark.timeout(600)
def test_two_prompts_on_the_embedded_gateway_are_compared_and_evaluated_with_intervals(gw: Gateway) -> None:
    tickets = tickets_frame()
    labels = pd.DataFrame({"urgent": [True, False, False, False], "team": ["tech", "billing", "billing", "tech"],
                           "channel": ["web", "mail", "web", "mail"]}, index=tickets.index)
    runs = [tickets.gw.decide(prompt, QUESTIONS, gateway=gw, checkpoint=None, progress=False, join=False)
            for prompt in ("{ticket}", "Support ticket: {ticket}")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)  # 4 rows: small, and said so
        result = gwlab.compare(*runs, truth={"urgent": labels["urgent"], "team": labels["team"]})
        ev = gwlab.evaluate(runs[0].join(labels.add_suffix("_label")),
                            truth={"urgent": "urgent_label", "team": "team_label"}, by="channel_label")
    assert set(result.table.index.get_level_values("question")) == {"urgent", "team"}
    assert (result.table["n"] == 4).all() and result.table["p_adjusted"].between(0, 1).all()
    assert "read nothing into it" in result.verdict and "more accurate" not in result.verdict
    assert list(ev.metrics.index.names) == ["question", "channel_label"] and ev.metrics["small"].all()
    assert (ev.metrics["accuracy_low"] <= ev.metrics["accuracy"]).all()


@pytest.mark.parametrize(("option", "field"), [({"level": 1.5}, "level"), ({"resamples": 0}, "resamples")])
def test_a_bad_level_or_resample_count_fails_naming_it(option: dict, field: str) -> None:
    a, b, truth = _pair(n=30)
    with pytest.raises(InvalidRequest) as raised:
        gwlab.compare(a, b, truth=truth, **option)
    assert raised.value.field == field
