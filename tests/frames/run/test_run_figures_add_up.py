"""Every number a run reports adds up (issue 31, point 9): a run's tokens and cost are the client ledger's
for the same run, invalid answers and re-asks included; the ledger's run label and the run record share
one id; the summary's row counts are the `__status` counts, on a first run and on a re-run. Against the
real embedded gateway and its local models."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor
from gwlab.client.gateway import Gateway
from gwlab.frames import _client
from gwlab.frames.run.usage import summarize
from tests.support.models import TEXT_MODEL

PRICES = {"local/*": {"input": 3.0, "output": 11.0}}  # any non-zero price: cost must follow the tokens
QUESTIONS = {"urgent": {"type": "noul", "instructions": "Does this need a reply today?"}}


def _ledger_rows(gw: Gateway, label: str) -> pd.DataFrame:
    usage = gw.usage
    return usage[usage["run"] == label]


def _same_figures(summary: object, record: pd.Series, ledger: pd.DataFrame) -> None:
    """The run's tokens and cost, on `.run` and in its record, are the ledger's for its calls."""
    billed = summarize(ledger, PRICES, by=())
    tokens_in, tokens_out = int(ledger["input_tokens"].sum()), int(ledger["output_tokens"].sum())
    assert (summary.input_tokens, summary.output_tokens) == (tokens_in, tokens_out)
    assert (record["input_tokens"], record["output_tokens"]) == (tokens_in, tokens_out)
    assert summary.cost == pytest.approx(float(billed["cost"].iloc[0]), rel=1e-9)
    assert record["cost"] == pytest.approx(summary.cost, rel=1e-9)


def test_an_extract_whose_answers_all_fail_validation_reports_the_tokens_it_paid(gw: Gateway,
                                                                                 tmp_path: Path) -> None:
    # 3 tokens cannot hold the JSON object: every answer and its re-ask is invalid, and each was billed
    frame = pd.DataFrame({"text": ["The kettle broke.", "Refund please.", "Love it.", "Where is my order?"]})
    store = tmp_path / "answers.sqlite"
    out = frame.gw.extract("Summarise: {text}", {"product": str, "refund": bool}, protocol="chat",
                           model=TEXT_MODEL, max_tokens=3, max_reasks=1, gateway=gw, checkpoint=store,
                           prices=PRICES, progress=False)
    assert (out["__status"] == "error").all() and out.run.reasked == 4
    ledger = _ledger_rows(gw, out.run.run_id)
    assert len(ledger) == 8 and (ledger["status"] == 200).all()  # 4 asks + 4 re-asks, all answered
    assert ledger["input_tokens"].sum() > 0  # the 4-row case reported 0 of them
    record = gwlab.runs(store).set_index("run_id").loc[out.run.run_id]
    _same_figures(out.run, record, ledger)


def test_a_run_id_is_the_ledger_label_of_its_calls(gw: Gateway, tmp_path: Path) -> None:
    frame = pd.DataFrame({"ticket": ["Server down, customers cannot pay.", "Thanks for the lovely card."]})
    store = tmp_path / "answers.sqlite"
    out = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, prices=PRICES, progress=False)
    ledger = _ledger_rows(gw, out.run.run_id)
    assert len(ledger) == 2 and set(ledger["request_id"]) == set(out["__request_id"])
    record = gwlab.runs(store).set_index("run_id").loc[out.run.run_id]
    assert record["ledger_run"] == out.run.run_id
    _same_figures(out.run, record, ledger)


def test_a_label_the_caller_set_stays_on_the_calls_and_is_kept_in_the_record(gw: Gateway, tmp_path: Path) -> None:
    frame = pd.DataFrame({"ticket": ["Invoice is wrong again."]})
    store = tmp_path / "answers.sqlite"
    with gwlab.label_calls("night batch"):
        out = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    record = gwlab.runs(store).set_index("run_id").loc[out.run.run_id]
    assert record["ledger_run"] == "night batch" != out.run.run_id
    assert out["__request_id"].iloc[0] in set(_ledger_rows(gw, "night batch")["request_id"])


def test_the_row_counts_keep_their_meaning_on_a_re_run(gw: Gateway, tmp_path: Path) -> None:
    server, invoice = "Server down, customers cannot pay.", "Invoice is wrong again."
    frame = pd.DataFrame({"ticket": [server, invoice, server, "Thanks!", server]})  # by hand: 3 requests,
    store = tmp_path / "answers.sqlite"                                                # 2 duplicate rows
    first = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    again = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    assert first["__status"].tolist() == ["sent", "sent", "duplicate", "sent", "duplicate"]
    assert again["__status"].tolist() == ["cached", "cached", "duplicate", "cached", "duplicate"]
    counts = [(s.sent_rows, s.cached_rows, s.duplicate_rows, s.error_rows) for s in (first.run, again.run)]
    assert counts == [(3, 0, 2, 0), (0, 3, 2, 0)]
    assert "5 rows, 3 sent, 0 cached, 2 duplicate" in first.run.text()
    assert "5 rows, 0 sent, 3 cached, 2 duplicate" in again.run.text()
    # the re-run paid nothing, and says so like the ledger, which has no call of it
    assert len(_ledger_rows(gw, again.run.run_id)) == 0 and again.run.input_tokens == 0
    # what summing the per-row columns means (docs/pandas.md): each row shows its answer's cost, so the
    # first run's bill is the sum over its `sent` rows; summing every row counts the duplicates twice
    sent = first["__status"] == "sent"
    ledger = _ledger_rows(gw, first.run.run_id)
    assert first.loc[sent, "__input_tokens"].sum() == first.run.input_tokens == ledger["input_tokens"].sum()
    assert first["__input_tokens"].sum() > first.run.input_tokens
    assert again["__input_tokens"].tolist() == first["__input_tokens"].tolist()  # a cached row's original cost
    listed = gwlab.runs(store)
    assert listed[["sent_rows", "cached_rows", "duplicate_rows"]].values.tolist() == [[3, 0, 2], [0, 3, 2]]


def test_the_paid_ask_before_a_failed_re_ask_is_in_the_runs_tokens(gw: Gateway) -> None:
    # fault injected: every re-ask fails before reaching the gateway; each row's first ask was answered
    # (invalid, 3 tokens cannot hold the object) and billed, so it counts although the row failed
    real = _client.connection(gw)
    calls = []

    async def send(family, body):
        calls.append(len(body["messages"]))
        if len(calls) % 2 == 0:  # concurrency=1: ask, re-ask, ask, re-ask
            raise RuntimeError("injected: the re-ask was lost")
        return await real.send(family, body)

    faulty = dataclasses.replace(real, send=send)
    frame = pd.DataFrame({"text": ["The kettle broke.", "Refund please."]})
    out = frame.gw.extract("Summarise: {text}", {"product": str, "refund": bool}, protocol="chat",
                           model=TEXT_MODEL, max_tokens=3, max_reasks=1, gateway=faulty, checkpoint=None,
                           prices=PRICES, concurrency=1, errors="coerce", progress=False)
    assert calls[0] < calls[1] and (out["__status"] == "error").all()
    assert out["__error"].str.contains("injected").all()
    ledger = _ledger_rows(gw, out.run.run_id)
    assert len(ledger) == 2 and ledger["input_tokens"].sum() > 0
    record = gwlab.runs(False).set_index("run_id").loc[out.run.run_id]
    _same_figures(out.run, record, ledger)
