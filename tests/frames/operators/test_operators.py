"""Operators across rows (df.gw.filter, merge, topk, aggregate) on the real embedded gateway, a few rows each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.operators.blocking import Blocking
from gwlab.frames.operators.merge import SMALL_RIGHT, MergePlan
from tests.support.gateways import RequestLog
from tests.support.models import TEXT_MODEL
from tests.support.tickets import DECISIONS, tickets_frame

TEAMS = pd.DataFrame({"team": ["billing", "engineering", "design"],
                      "handles": ["payments, invoices, charges and refunds", "crashes, bugs and outages",
                                  "typos and layout of the web pages"]}, index=["t1", "t2", "t3"])
CONDITION = "The ticket is for this team"


@pytest.fixture
def log(gateway) -> RequestLog:
    return RequestLog(gateway.db)


def quiet(gw: Gateway, **options: Any) -> dict[str, Any]:
    return {"gateway": gw, "progress": False, "checkpoint": None, **options}


def test_filter_keeps_the_rows_whose_probability_reaches_the_threshold(gw: Gateway) -> None:
    tickets = tickets_frame()
    out = tickets.gw.filter("The customer was charged money", state="{ticket}", threshold=0.5, **quiet(gw))
    every = out.answers["condition__noul"]
    assert len(every) == len(tickets) and list(out.index) == list(tickets.index[(every >= 0.5).to_numpy()])
    assert list(out.columns) == [*tickets.columns, "condition__noul"]
    assert out.run.operator == "filter" and out.run.sent == len(tickets)


def test_merge_with_a_small_right_side_counts_its_requests_before_sending_then_asks_one_per_left_row(
        gw: Gateway, log: RequestLog) -> None:
    tickets = tickets_frame()
    mark = log.mark()
    plan = tickets.gw.merge(TEAMS, CONDITION, left_on="{ticket}", dry_run=True, gateway=gw)
    assert isinstance(plan, MergePlan) and plan.strategy == "choice"
    assert (plan.requests, plan.pairwise) == (len(tickets), len(tickets) * len(TEAMS))
    assert log.settled(mark) == []  # the count came before anything was sent

    out = tickets.gw.merge(TEAMS, CONDITION, left_on="{ticket}", how="left", **quiet(gw))
    assert len(log.settled(mark, DECISIONS)) == plan.requests == out.run.sent
    assert list(out.index) == list(tickets.index)  # how="left": every left row, on the left's index
    assert set(out["right_index"].dropna()) <= set(TEAMS.index)
    matched = out["right_index"].notna()
    assert out.loc[matched, "match__p"].between(0, 1).all()
    assert (out.loc[matched, "team"] == TEAMS.loc[out.loc[matched, "right_index"], "team"].to_numpy()).all()


def test_merge_with_a_pilot_sends_only_the_pilot_rows(gw: Gateway, log: RequestLog) -> None:
    mark = log.mark()
    out = tickets_frame().gw.merge(TEAMS, CONDITION, left_on="{ticket}", pilot=2, **quiet(gw))
    assert len(log.settled(mark, DECISIONS)) == 2 and out.run.sent == 2 and out.run.stopped == "pilot"


def test_merge_with_a_large_right_side_asks_only_each_left_rows_blocked_candidates(
        gw: Gateway, log: RequestLog) -> None:
    products = pd.DataFrame({"product": [f"product {i}: a widget of model {i}" for i in range(SMALL_RIGHT)]
                             + ["payment page and checkout", "invoice copies"]})
    tickets = tickets_frame().iloc[:2]
    blocking = Blocking(candidates=2)
    plan = tickets.gw.merge(products, "The ticket is about this product", left_on="{ticket}", dry_run=True,
                            blocking=blocking)
    assert plan.strategy == "pairwise" and plan.requests == 2 * 2 and plan.pairwise == 2 * len(products)
    mark = log.mark()
    out = tickets.gw.merge(products, "The ticket is about this product", left_on="{ticket}", blocking=blocking,
                           **quiet(gw))
    assert len(log.settled(mark, DECISIONS)) == plan.requests and out.run.strategy == "pairwise"
    assert out["match__p"].ge(blocking.threshold).all()


def test_topk_returns_k_ranked_rows_and_counts_its_comparisons(gw: Gateway, log: RequestLog) -> None:
    tickets = tickets_frame()
    mark = log.mark()
    out = tickets.gw.topk("How urgent the ticket is", 2, state="{ticket}", window=1, **quiet(gw))
    assert len(out) == 2 and list(out["rank"]) == [1, 2]
    assert out.run.comparisons == 1  # the two rows at the cut, compared once
    assert len(log.settled(mark, DECISIONS)) == len(tickets) + 1 == out.run.sent  # the comparison: one request
    assert out["wins"].notna().sum() <= 2


def test_aggregate_over_a_group_larger_than_the_input_limit_maps_chunks_then_reduces(
        gw: Gateway, log: RequestLog) -> None:
    tickets = tickets_frame()
    mark = log.mark()
    out = tickets.gw.aggregate("List the problems in a few words.", text="{ticket}", model=TEXT_MODEL,
                               max_tokens=8, max_input_tokens=90, **quiet(gw))
    assert list(out.index) == ["all"] and out.loc["all", "rows"] == len(tickets)
    assert isinstance(out.loc["all", "answer"], str) and out.loc["all", "__error"] is None
    first_level = out.run.runs[0]["requests"]
    assert first_level >= 2 and out.run.levels >= 2 and out.run.runs[-1]["requests"] == 1
    assert len(log.settled(mark)) == out.run.sent == out.loc["all", "requests"]


def test_aggregate_by_group_answers_each_group(gw: Gateway) -> None:
    frame = pd.DataFrame({"team": ["a", "b", "a"], "note": ["login fails", "invoice missing", "page slow"]})
    out = frame.gw.aggregate("Name the theme in two words.", by="team", model=TEXT_MODEL, max_tokens=6,
                             max_input_tokens=4000, **quiet(gw))
    assert list(out.index) == ["a", "b"] and list(out["rows"]) == [2, 1] and list(out["requests"]) == [1, 1]


def test_aggregate_refuses_a_row_too_long_for_the_limit_naming_it(gw: Gateway, log: RequestLog) -> None:
    frame = pd.DataFrame({"note": ["short", "long " * 200]}, index=["ok", "huge"])
    mark = log.mark()
    with pytest.raises(InvalidRequest, match="'huge'") as raised:
        frame.gw.aggregate("Summarise.", model=TEXT_MODEL, max_input_tokens=200, **quiet(gw))
    assert raised.value.field == "text" and log.settled(mark) == []
    out = frame.gw.aggregate("Summarise.", model=TEXT_MODEL, max_input_tokens=200, errors="coerce", **quiet(gw))
    assert "'huge'" in out.loc["all", "__error"] and pd.isna(out.loc["all", "answer"])


def test_every_operator_resumed_from_its_checkpoint_pays_nothing_twice(
        gw: Gateway, log: RequestLog, tmp_path: Path) -> None:
    tickets = tickets_frame().iloc[:3]
    options = quiet(gw, checkpoint=tmp_path / "answers.sqlite")
    calls = {
        "filter": lambda: tickets.gw.filter("The customer was charged money", state="{ticket}", **options),
        "merge": lambda: tickets.gw.merge(TEAMS, CONDITION, left_on="{ticket}", **options),
        "topk": lambda: tickets.gw.topk("How urgent the ticket is", 1, state="{ticket}", window=1, **options),
        "aggregate": lambda: tickets.gw.aggregate("List the problems.", text="{ticket}", model=TEXT_MODEL,
                                                  max_tokens=8, max_input_tokens=90, **options),
    }
    for name, call in calls.items():
        first = call()
        mark = log.mark()
        again = call()
        assert log.settled(mark) == [], name
        assert again.run.sent == 0 and again.run.cached == first.run.sent + first.run.cached > 0, name


@pytest.mark.parametrize(("call", "field"), [
    (lambda f, o: f.gw.filter("Is it urgent?", threshold=1.5, **o), "threshold"),
    (lambda f, o: f.gw.filter("  ", **o), "condition"),
    (lambda f, o: f.gw.filter("Is it urgent?", concurrency=0, **o), "concurrency"),
    (lambda f, o: f.gw.merge(TEAMS, CONDITION, how="outer", dry_run=True, **o), "how"),
    (lambda f, o: f.gw.merge(["billing"], CONDITION, dry_run=True, **o), "right"),
    (lambda f, o: f.gw.merge(TEAMS, CONDITION, right_on="{nope}", dry_run=True, **o), "right_on"),
    (lambda f, o: f.gw.merge(TEAMS, CONDITION, blocking=Blocking(candidates=0), dry_run=True, **o), "blocking"),
    (lambda f, o: f.gw.topk("urgency", 0, **o), "k"),
    (lambda f, o: f.gw.topk("urgency", 2, window=-1, **o), "window"),
    (lambda f, o: f.gw.topk("urgency", 2, levels=["only one"], **o), "levels"),
    (lambda f, o: f.gw.aggregate("Summarise.", by="nope", max_input_tokens=100, **o), "by"),
    (lambda f, o: f.gw.aggregate("Summarise.", protocol="images", **o), "protocol"),
    (lambda f, o: f.gw.aggregate("Summarise.", max_input_tokens=0, **o), "max_input_tokens"),
])
def test_bad_operator_arguments_are_refused_naming_the_field(call: Any, field: str, gw: Gateway,
                                                             log: RequestLog) -> None:
    mark = log.mark()
    with pytest.raises(InvalidRequest) as raised:
        call(tickets_frame(), quiet(gw))
    assert raised.value.field == field and log.rows(mark) == []
