"""df.gw.decide(..., cascade=gwlab.Cascade(...)) on the real embedded gateway, and its refusals."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from tests.support.gateways import RequestLog
from tests.support.messages import QUESTIONS, support_messages
from tests.support.models import DECIDE_MODEL

REFUND = {"refund": QUESTIONS["refund"]}


@pytest.fixture(scope="module")
def messages() -> pd.DataFrame:
    return support_messages(60)


def cascade_run(frame: pd.DataFrame, gw: Gateway, questions: dict, cascade: gwlab.Cascade, **options):
    options.setdefault("checkpoint", None)
    return frame.gw.decide("{text}", questions, gateway=gw, progress=False, cascade=cascade, **options)


def test_label_oracle_answers_fewer_rows_than_the_frame_has(messages: pd.DataFrame, gw: Gateway,
                                                             gateway) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    cascade = gwlab.Cascade(oracle=messages["refund"], metric="accuracy", target=0.6, delta=0.2, sample=30)
    out = cascade_run(messages, gw, REFUND, cascade)
    calls = out.run.cascade["oracle_calls"]
    assert calls["total"] < len(messages) and out.run.cascade["proxy_rows"] > 0 and out.run.cascade["certified"]
    oracle_rows = out["refund__source"] == "oracle"
    assert oracle_rows.sum() == calls["total"] == out.run.cascade["oracle_rows"]
    assert (out.loc[oracle_rows, "refund__answer"] == messages.loc[oracle_rows, "refund"]).all()
    mine = out.loc[~oracle_rows, "refund__proxy__noul"] >= 0.5  # the proxy's rows keep its own answer
    assert (out.loc[~oracle_rows, "refund__answer"] == mine).all()
    assert (out["refund__noul"] == out["refund__answer"].astype(float)).all()  # the question's column: delivered
    assert (out.loc[~oracle_rows, "refund__proxy_score"] >= out.run.cascade["threshold"]).all()
    assert len(log.settled(mark, "/v1/decisions")) == len(messages)  # the labels cost no request
    assert "oracle calls" in out.run.text() and "certified accuracy >= 0.600" in out.run.text()


def test_a_recall_cascade_that_cannot_bound_the_rest_sends_every_row_to_the_oracle(
        messages: pd.DataFrame, gw: Gateway) -> None:
    """60 rows, 30 samples: too few sampled refunds to bound those below a threshold (SUPG's corrected
    target reaches 1), so the oracle answers every row and the claimed recall 1 is exact."""
    cascade = gwlab.Cascade(oracle=messages["refund"], metric="recall", target=0.8, delta=0.2, sample=30)
    out = cascade_run(messages, gw, REFUND, cascade)
    c = out.run.cascade
    assert c["proxy_rows"] == 0 and c["oracle_calls"]["total"] == len(messages) and c["bound"] == 1.0
    assert "every row went to the oracle" in c["note"] and "every row went to the oracle" in out.run.text()
    assert (out["refund__answer"] == messages["refund"]).all()


def test_resumed_cascade_with_a_model_oracle_sends_nothing_twice(messages: pd.DataFrame, gw: Gateway, gateway,
                                                                 tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    both = {"refund": QUESTIONS["refund"], "urgent": QUESTIONS["urgent"]}  # the oracle asks refund alone
    cascade = gwlab.Cascade(oracle=DECIDE_MODEL, question="refund", target=0.6, delta=0.2, sample=20)
    mark = log.mark()
    first = cascade_run(messages, gw, both, cascade, checkpoint=tmp_path / "c.sqlite")
    sent = log.settled(mark, "/v1/decisions")
    assert first.run.cascade["oracle_sent"] == first.run.cascade["oracle_calls"]["total"] > 0
    assert len(sent) == len(messages) + first.run.cascade["oracle_sent"]
    estimate, sampled = first.run.cascade["routed_estimate"], first.run.cascade["oracle_calls"]["sampled"]
    per_request = sum(r["input_tokens"] for r in sent[-first.run.cascade["oracle_sent"]:][:sampled]) / sampled
    assert estimate["calls"] == first.run.cascade["oracle_calls"]["routed"] and estimate["within_budget"] is None
    assert estimate["tokens"] == pytest.approx(estimate["calls"] * per_request, rel=0.5)
    mark = log.mark()
    again = cascade_run(messages, gw, both, cascade, checkpoint=tmp_path / "c.sqlite")
    assert log.settled(mark, "/v1/decisions") == []
    assert again.run.cascade["oracle_cached"] == first.run.cascade["oracle_sent"] and again.run.sent == 0
    pd.testing.assert_series_equal(again["refund__answer"], first["refund__answer"])


@pytest.mark.parametrize(("arguments", "field"), [
    ({"oracle": 3}, "oracle"), ({"oracle": "  "}, "oracle"),
    ({"oracle": "m", "metric": "f1"}, "metric"), ({"oracle": "m", "target": 1.0}, "target"),
    ({"oracle": "m", "delta": 0}, "delta"), ({"oracle": "m", "sample": 0}, "sample"),
    ({"oracle": "m", "candidates": 2.5}, "candidates"), ({"oracle": "m", "seed": "x"}, "seed")])
def test_cascade_refuses_a_bad_argument_naming_it(arguments: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        gwlab.Cascade(**arguments)
    assert caught.value.field == field


@pytest.mark.parametrize(("questions", "cascade", "field"), [
    (QUESTIONS, gwlab.Cascade(oracle="m"), "question"),
    (REFUND, gwlab.Cascade(oracle="m", question="team"), "question"),
    ({"team": QUESTIONS["team"]}, gwlab.Cascade(oracle="m", metric="recall"), "metric")])
def test_decide_refuses_a_cascade_that_does_not_fit_the_run_before_sending(
        messages: pd.DataFrame, questions: dict, cascade: gwlab.Cascade, field: str, gateway, gw: Gateway) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    with pytest.raises(InvalidRequest) as caught:
        cascade_run(messages, gw, questions, cascade)
    assert caught.value.field == field and log.rows(mark) == []


def test_cascade_pilot_reaches_only_its_rows_and_estimates_the_oracle_calls_of_the_whole_frame(
        messages: pd.DataFrame, gw: Gateway, gateway, tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    cascade = gwlab.Cascade(oracle=DECIDE_MODEL, question="refund", target=0.6, delta=0.2, sample=8)
    both = {"refund": QUESTIONS["refund"], "urgent": QUESTIONS["urgent"]}
    mark = log.mark()
    pilot = cascade_run(messages, gw, both, cascade, pilot=20, checkpoint=tmp_path / "c.sqlite")
    c, reached = pilot.run.cascade, pilot["__status"] != "not_run"
    assert pilot.run.stopped == "pilot" and pilot.run.pilot["rows"] == (~reached).sum() > 0
    assert len(log.settled(mark, "/v1/decisions")) == pilot.run.sent + c["oracle_sent"]
    assert pilot.loc[~reached, "refund__answer"].isna().all() and pilot.loc[~reached, "refund__source"].isna().all()
    assert (pilot.loc[reached, "refund__source"].isin(["proxy", "oracle"])).all()
    assert c["all_oracle_calls"] == reached.sum() and c["oracle_rows"] == (pilot["refund__source"] == "oracle").sum()
    estimate = c["pilot"]
    assert estimate["rows"] == (~reached).sum() and estimate["all_oracle_calls"] == len(messages)
    assert cascade.sample <= estimate["oracle_calls"] <= len(messages)
    assert "cascade pilot: the whole frame would call the oracle about" in pilot.run.text()
    mark = log.mark()
    whole = cascade_run(messages, gw, both, cascade, checkpoint=tmp_path / "c.sqlite")
    assert whole.run.cached == pilot.run.sent and whole.run.sent == len(messages) - reached.sum()  # none twice
    assert whole["refund__source"].notna().all()


def test_label_oracle_missing_a_label_is_refused_before_anything_is_paid(messages: pd.DataFrame, gw: Gateway,
                                                                       gateway) -> None:
    """Any row the cheap model reaches may go to the oracle, so a missing label is found before the cheap
    model's run, not when the cascade reaches it (issue 31 point 10); a pilot's rows are all it checks."""
    labels = messages["refund"].astype(object).where(messages.index > messages.index[10])  # 11 rows unlabelled
    log = RequestLog(gateway.db)
    mark = log.mark()
    with pytest.raises(InvalidRequest, match="no label for 11 of the 60 rows") as caught:
        cascade_run(messages, gw, REFUND, gwlab.Cascade(oracle=labels, sample=20))
    assert caught.value.field == "oracle" and repr(messages.index[0]) in str(caught.value)
    assert log.settled(mark, "/v1/decisions") == []
    late = messages["refund"].astype(object).where(messages.index < messages.index[50])  # past a pilot of 20
    out = cascade_run(messages, gw, REFUND, gwlab.Cascade(oracle=late, sample=10), pilot=20)
    assert out["refund__source"].iloc[:20].notna().all()


def test_cascade_repr_never_prints_the_labels(messages: pd.DataFrame) -> None:
    assert repr(gwlab.Cascade(oracle=messages["refund"])).startswith("Cascade(oracle=<labels: 60 rows>")


def test_cascade_budget_covers_the_oracle_too_and_leaves_unpaid_rows_unanswered(
        messages: pd.DataFrame, gw: Gateway, gateway) -> None:
    both = {"refund": QUESTIONS["refund"], "urgent": QUESTIONS["urgent"]}
    budget = int(messages.gw.decide("{text}", both, gateway=gw, progress=False, checkpoint=None).run.input_tokens)
    log = RequestLog(gateway.db)
    mark = log.mark()
    cascade = gwlab.Cascade(oracle=DECIDE_MODEL, question="refund", sample=20)
    out = cascade_run(messages, gw, both, cascade, budget=budget)  # the proxy alone would fill it
    billed = log.settled(mark, "/v1/decisions")
    assert sum(r["input_tokens"] for r in billed) <= budget
    assert len(billed) == out.run.sent + out.run.cascade["oracle_sent"] < 2 * len(messages)
    unpaid = out["refund__source"].eq("oracle") & out["refund__answer"].isna()
    assert unpaid.sum() > 0  # the rows beyond the budget are left missing, never guessed
    estimate = out.run.cascade["routed_estimate"]  # told before the routed rows were sent
    assert estimate["calls"] == out.run.cascade["oracle_calls"]["routed"] and estimate["within_budget"] is False
    assert "are over the budget left" in out.run.text()



def test_cascade_reads_and_names_its_columns_under_a_prefix(messages: pd.DataFrame, gw: Gateway) -> None:
    cascade = gwlab.Cascade(oracle=messages["refund"], metric="accuracy", target=0.6, delta=0.2, sample=30)
    out = cascade_run(messages, gw, REFUND, cascade, prefix="cheap_", join=False)
    assert list(out.columns[-3:]) == ["cheap_refund__answer", "cheap_refund__source", "cheap_refund__proxy_score"]
    assert out["cheap_refund__source"].eq("proxy").sum() == out.run.cascade["proxy_rows"] > 0
    assert {"cheap_refund__noul", "cheap_refund__proxy__noul"} <= set(out.columns)


def test_cascade_never_renames_the_frames_own_columns(messages: pd.DataFrame, gw: Gateway) -> None:
    cascade = gwlab.Cascade(oracle=messages["refund"], metric="accuracy", target=0.6, delta=0.2, sample=30)
    out = cascade_run(messages.assign(refund__label=messages["refund"]), gw, REFUND, cascade)
    assert "refund__label" in out.columns and "refund__proxy__label" not in out.columns


def test_cascade_refuses_a_column_clash_before_sending(messages: pd.DataFrame, gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    with pytest.raises(InvalidRequest) as caught:
        cascade_run(messages.assign(refund__source="x"), gw, REFUND, gwlab.Cascade(oracle=messages["refund"]))
    assert caught.value.field == "prefix" and log.rows(mark) == []


def test_filter_with_a_cascade_keeps_the_rows_its_answer_keeps_and_the_oracle_decides_the_rest(
        messages: pd.DataFrame, gw: Gateway) -> None:
    cascade = gwlab.Cascade(oracle=messages["refund"], metric="recall", target=0.8, delta=0.2, sample=30)
    kept = messages.gw.filter("The customer asks for money back", state="{text}", name="refund", cascade=cascade,
                              gateway=gw, checkpoint=None, progress=False)
    answers = kept.answers
    assert list(kept.index) == list(answers.index[answers["refund__answer"] == True])  # noqa: E712
    by_oracle = answers["refund__source"] == "oracle"
    assert by_oracle.any() and (answers.loc[by_oracle, "refund__answer"] == messages.loc[by_oracle, "refund"]).all()
    assert {"refund__answer", "refund__source"} <= set(kept.columns)
