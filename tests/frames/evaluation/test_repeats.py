"""`repeats=k` on the real local gateway: every repeat's answer, agreement across repeats, resuming
without paying twice; and the repeats scored pooled or reduced."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.repeats import stability
from tests.support.gateways import RequestLog
from tests.support.models import TEXT_MODEL
from tests.support.tickets import DECISIONS, QUESTIONS, tickets_frame

YES_NO = {"type": "json_schema", "json_schema": {"name": "yes_no", "strict": True, "schema": {
    "type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"], "additionalProperties": False}}}


def _modal_share(texts: pd.Series) -> float:
    """Read independently of gwlab: each repeat's choice parsed from its JSON, the most common one's share."""
    choices = [json.loads(t)["answer"] for t in texts]
    return Counter(choices).most_common(1)[0][1] / len(choices)


def test_every_repeat_of_a_sampled_text_model_is_a_row_and_its_agreement_is_the_share_of_the_modal_choice(
        gw: Gateway) -> None:
    """A choice-like answer (a JSON-schema enum) sampled at temperature 1.5: the local model writes the same
    choice with different spacing, which must count as agreeing."""
    frame = pd.DataFrame({"q": ["Is the sky green?", "Is fire hot?", "Is water wet?"]},
                         index=pd.Index(["sky", "fire", "water"], name="item"))
    out = frame.gw.chat("{q}", model=TEXT_MODEL, gateway=gw, repeats=4, max_tokens=24,
                        params={"temperature": 1.5, "response_format": YES_NO}, checkpoint=None, progress=False)
    long = out.repeats_frame()
    assert long.index.names == ["item", "repeat"] and len(long) == 12
    assert list(long.index.get_level_values("repeat")) == [0, 1, 2, 3] * 3
    assert list(long["q"]) == list(frame["q"].repeat(4))  # the input columns join each repeat
    assert set(long["__status"]) == {"sent"} and long["__request_id"].nunique() == 12
    for item in frame.index:
        assert out.loc[item, "text__agreement"] == pytest.approx(_modal_share(long.loc[item, "text"]))
    table = stability(out)
    assert table.loc["text", "rows"] == 3
    assert table.loc["text", "changed"] == pytest.approx(float((out["text__agreement"] < 1).mean()))
    assert np.isnan(table.loc["text", "p_std"])  # text has no probabilities


def test_the_deterministic_decision_model_shows_zero_spread_across_repeats(gw: Gateway) -> None:
    out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=None, progress=False)
    assert (out[["urgent__agreement", "team__agreement", "severity__agreement"]] == 1.0).all().all()
    table = stability(out)
    assert list(table.index) == ["urgent", "team", "severity"]
    assert (table["changed"] == 0).all() and (table["rows"] == 4).all()
    assert table["p_std_max"].to_numpy() == pytest.approx(0.0, abs=1e-9)
    long = out.repeats_frame()
    assert long.groupby(level="ticket_id")["team__choice"].nunique().eq(1).all()


def test_a_resumed_repeat_run_sends_nothing_and_returns_every_repeat_again(gateway, gw: Gateway,
                                                                           tmp_path: Path) -> None:
    log, path = RequestLog(gateway.db), tmp_path / "answers.sqlite"
    frame = tickets_frame().iloc[:2]
    first = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=path, progress=False)
    mark = log.mark()
    again = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=path, progress=False)
    assert log.settled(mark, path=DECISIONS) == [] and again.run.sent == 0 and again.run.cached == 6
    before, after = first.repeats_frame(), again.repeats_frame()
    assert set(before["__status"]) == {"sent"} and set(after["__status"]) == {"cached"}
    answers = [c for c in before.columns if "__" in c and not c.startswith("__")]
    pd.testing.assert_frame_equal(before[answers], after[answers])


def test_a_result_without_repeats_says_how_to_get_them(gw: Gateway) -> None:
    out = tickets_frame().iloc[:1].gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False)
    with pytest.raises(gwlab.InvalidRequest, match="repeats=k") as info:
        out.repeats_frame()
    assert info.value.field == "repeats"


def test_pooled_and_reduced_scores_of_a_deterministic_model_equal_its_plain_scores(gw: Gateway) -> None:
    frame = tickets_frame().assign(label=["tech", "billing", "billing", "tech"])
    out = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=None, progress=False)
    plain = gwlab.evaluate(out, truth={"team": "label"}).metrics.loc["team"]
    for reduce in (None, "mean", "majority"):
        scored = gwlab.evaluate(out.repeats_frame(), truth={"team": "label"}, reduce=reduce).metrics.loc["team"]
        assert scored["n"] == (12 if reduce is None else 4)
        assert scored["accuracy"] == pytest.approx(plain["accuracy"])
    with pytest.warns(EvaluationWarning, match=r"fewer than 10 rows.*\(n=12\)"):  # 4 rows, 12 answers
        pooled = gwlab.evaluate(out.repeats_frame(), truth={"team": "label"}).metrics.loc["team"]
    assert pooled["brier"] == pytest.approx(plain["brier"], abs=1e-9)


def _long(answers: dict[str, list], k: int) -> pd.DataFrame:
    rows = len(next(iter(answers.values()))) // k
    index = pd.MultiIndex.from_arrays([np.repeat(np.arange(rows), k), np.tile(np.arange(k), rows)],
                                      names=["id", "repeat"])
    return pd.DataFrame(answers, index=index)


def test_reduce_majority_scores_the_vote_and_mean_the_mean_probabilities() -> None:
    # row 0: votes a, a, b (mean p(a) 0.5); row 1: b, b, b
    long = _long({"team__choice": ["a", "a", "b", "b", "b", "b"],
                  "team__p__a": [0.55, 0.55, 0.4, 0.1, 0.2, 0.3],
                  "team__p__b": [0.45, 0.45, 0.6, 0.9, 0.8, 0.7],
                  "label": ["b", "b", "b", "b", "b", "b"]}, k=3)
    majority = gwlab.evaluate(long, truth={"team": "label"}, reduce="majority").metrics.loc["team"]
    assert majority["accuracy"] == pytest.approx(0.5)  # row 0's vote is a
    assert majority["brier"] == pytest.approx(((2 / 3) ** 2 * 2 + 0) / 2)  # vote shares as probabilities
    mean = gwlab.evaluate(long, truth={"team": "label"}, reduce="mean").metrics.loc["team"]
    assert mean["accuracy"] == pytest.approx(0.5)  # row 0: mean p(a) = p(b) = 0.5, the tie goes to a
    assert mean["brier"] == pytest.approx((0.5 ** 2 * 2 + 0.2 ** 2 * 2) / 2)


def test_reduce_on_a_frame_without_repeats_or_an_unknown_reducer_raises_naming_reduce() -> None:
    long = _long({"urgent__noul": [0.2, 0.9], "label": [True, True]}, k=2)
    with pytest.raises(gwlab.InvalidRequest, match="repeats frame") as info:
        gwlab.evaluate(long.droplevel("repeat"), truth={"urgent": "label"}, reduce="mean")
    assert info.value.field == "reduce"
    with pytest.raises(gwlab.InvalidRequest, match="'majority', 'mean'") as info:
        gwlab.evaluate(long, truth={"urgent": "label"}, reduce="median")
    assert info.value.field == "reduce"


def test_pooled_accuracy_interval_is_the_bootstrap_of_row_means_not_of_repeats() -> None:
    """Equal repeats per row: pooled accuracy is the mean of per-row accuracies, so the cluster bootstrap
    must match scipy's bootstrap of those row means (Monte Carlo on both sides: within 0.02)."""
    from scipy import stats
    rng = np.random.default_rng(7)
    rows, k = 60, 4
    hit = np.repeat(rng.uniform(size=rows), k) > rng.uniform(size=rows * k) * 0.6 + 0.2
    long = _long({"urgent__noul": np.where(hit, 0.8, 0.2).tolist(), "label": [True] * rows * k}, k=k)
    ev = gwlab.evaluate(long, truth={"urgent": "label"}, resamples=4000)
    m = ev.metrics.loc["urgent"]
    per_row = hit.reshape(rows, k).mean(axis=1)
    ref = stats.bootstrap((per_row,), np.mean, n_resamples=4000, method="percentile", random_state=1)
    assert m["accuracy"] == pytest.approx(per_row.mean())
    assert m["accuracy_low"] == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert m["accuracy_high"] == pytest.approx(ref.confidence_interval.high, abs=0.02)
    assert "cluster bootstrap" in ev.methods["accuracy"]
    naive = gwlab.evaluate(long.droplevel("repeat").reset_index(drop=True), truth={"urgent": "label"})
    width = m["accuracy_high"] - m["accuracy_low"]
    assert width > naive.metrics.loc["urgent", "accuracy_high"] - naive.metrics.loc["urgent", "accuracy_low"]


def _sides(rows: int, k: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, np.ndarray, np.ndarray]:
    """Two sampled models' repeats of one yes/no question (truth: all yes), and who was right per repeat."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.3, 0.9, rows)
    right_a = rng.uniform(size=(rows, k)) < skill[:, None]
    right_b = rng.uniform(size=(rows, k)) < np.clip(skill + 0.1, 0, 1)[:, None]
    a = _long({"urgent__noul": np.where(right_a, 0.7, 0.3).ravel()}, k)
    b = _long({"urgent__noul": np.where(right_b, 0.7, 0.3).ravel()}, k)
    return a, b, pd.Series(True, index=pd.RangeIndex(rows, name="id")), right_a, right_b


def test_compare_pools_two_repeats_frames_with_a_paired_cluster_bootstrap() -> None:
    """Equal repeats per row: the pooled accuracy difference is the mean of per-row differences, so its
    interval must match scipy's bootstrap of those (Monte Carlo both sides: within 0.02)."""
    from scipy import stats
    a, b, truth, right_a, right_b = _sides(rows=50, k=4, seed=11)
    row = gwlab.compare(a, b, truth={"urgent": truth}, resamples=4000).table.loc[("urgent", "accuracy")]
    per_row = right_b.mean(axis=1) - right_a.mean(axis=1)
    ref = stats.bootstrap((per_row,), np.mean, n_resamples=4000, method="percentile", random_state=1)
    assert row["n"] == 200 and row["diff"] == pytest.approx(per_row.mean())
    assert row["diff_low"] == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert row["diff_high"] == pytest.approx(ref.confidence_interval.high, abs=0.02)
    assert "cluster" in row["method"]


def test_compare_reduces_each_side_to_its_majority_before_pairing() -> None:
    a, b, truth, right_a, right_b = _sides(rows=30, k=3, seed=12)
    table = gwlab.compare(a, b, truth={"urgent": truth}, reduce="majority").table
    row = table.loc[("urgent", "accuracy")]
    assert row["n"] == 30
    assert row["a"] == pytest.approx((right_a.sum(axis=1) >= 2).mean())  # 3 votes: 2 make the majority
    assert row["b"] == pytest.approx((right_b.sum(axis=1) >= 2).mean())
    assert row["method"].startswith("McNemar")


def test_compare_of_a_repeats_frame_with_a_plain_one_asks_for_reduce() -> None:
    a, b, truth, _, _ = _sides(rows=5, k=2, seed=13)
    with pytest.raises(gwlab.InvalidRequest, match="reduce=") as info:
        gwlab.compare(a, b.groupby(level="id").first(), truth={"urgent": truth})
    assert info.value.field == "reduce"


def test_reducing_averages_the_answers_and_keeps_the_input_columns_as_they_were() -> None:
    from gwlab.frames.evaluation.repeats import reduce_repeats
    long = _long({"urgent__noul": [0.2, 0.9, 0.6, 0.7], "label": [True, True, False, False]}, k=2)
    out = reduce_repeats(long, "mean")
    assert out["label"].dtype == bool and list(out["label"]) == [True, False]
    assert out["urgent__noul"].tolist() == pytest.approx([0.55, 0.65])
    assert reduce_repeats(long, "majority")["urgent__noul"].tolist() == pytest.approx([0.5, 1.0])  # vote shares
