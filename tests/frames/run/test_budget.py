"""Budgets and pilots against the real gateway: its own request log is the bill."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from gwlab.client.gateway import Gateway
from gwlab.frames.accessor import InputLimitWarning
from gwlab.frames.run.runner import Budget
from tests.support.gateways import RequestLog
from tests.support.tickets import DECISIONS, QUESTIONS


@pytest.fixture(scope="module")
def gw(gateway) -> Iterator[Gateway]:
    with Gateway(gateway.base_url, gateway.api_key) as client:
        yield client


def rows(n: int, tag: str) -> pd.DataFrame:
    return pd.DataFrame({"ticket": [f"{tag} case {i}: the invoice is wrong by {i} euros" for i in range(n)]})


def test_budget_stops_the_run_before_the_gateway_bills_beyond_it(gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    budget = 1000  # ~11 requests of ~90 tokens, but each estimate reserves the body's ~330 bytes
    mark = log.mark()
    out = rows(30, "budget").gw.decide("{ticket}", QUESTIONS, gateway=gw, budget=budget, checkpoint=None,
                                       concurrency=4, progress=False)
    billed = log.settled(mark, DECISIONS)
    assert 0 < len(billed) < 30
    assert sum(r["input_tokens"] for r in billed) <= budget  # the gateway's bill, not our estimate
    assert out.run.stopped == "budget" and out.run.input_tokens == sum(r["input_tokens"] for r in billed)
    status = out["__status"].value_counts()
    assert status["sent"] == len(billed) and status["not_run"] == 30 - len(billed)
    assert out.run.error_rows == 0 and out.loc[out["__status"] == "not_run", "__error"].isna().all()


def test_cost_budget_with_a_price_table(gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    prices = {"local/decide-e5-small": {"input": 10.0, "output": 1000.0}}  # $10 per million input tokens
    mark = log.mark()
    out = rows(30, "cost").gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False,
                                     budget=Budget(cost=0.005, prices=prices))
    billed = sum(r["input_tokens"] for r in log.settled(mark, DECISIONS))
    assert billed * 10.0 / 1e6 <= 0.005 and out.run.stopped == "budget"
    assert out.run.cost == pytest.approx(billed * 10.0 / 1e6)  # decisions: output tokens are free


def test_pilot_estimates_the_rest_close_to_what_it_then_costs(gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    frame = rows(24, "pilot")
    pilot = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, pilot=6, checkpoint=None, progress=False)
    assert pilot.run.stopped == "pilot" and (pilot["__status"] == "not_run").sum() == 18
    estimate = pilot.run.pilot
    assert estimate["rows"] == 18 and estimate["requests"] == 18
    mark = log.mark()
    frame.iloc[6:].gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False)
    actual = sum(r["input_tokens"] for r in log.settled(mark, DECISIONS))
    assert estimate["input_tokens"] == pytest.approx(actual, rel=0.2)


def test_pilot_names_rows_over_the_models_input_limit_before_sending_any(gw: Gateway, gateway) -> None:
    frame = rows(8, "limit")
    long = "The invoice is wrong and the refund never came. " * 60  # ~2,900 bytes: over 512 tokens
    frame.loc[[5, 7], "ticket"] = long
    log = RequestLog(gateway.db)
    mark = log.mark()
    with pytest.warns(InputLimitWarning, match=r"2 rows look longer than local/decide-e5-small's input limit of "
                                               r"512 tokens .*rows 5 \(~\d+ tokens\), 7 \(~\d+ tokens\)"):
        pilot = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, pilot=3, checkpoint=None, progress=False)
    assert len(log.settled(mark, DECISIONS)) == 3  # only the pilot's rows were sent
    over = pilot.run.over_limit
    assert over["model"] == "local/decide-e5-small" and over["limit"] == 512  # read from GET /models
    assert over["count"] == 2 and over["rows"] == [5, 7] and min(over["estimated_tokens"]) > 512
    assert "over the input limit: 2 rows" in pilot.run.text() and "(rows 5, 7)" in pilot.run.text()

    # the estimate was right: the gateway refuses exactly those rows, naming the state and the limit
    full = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False, errors="coerce")
    refused = full.index[full["__status"] == "error"].tolist()
    assert refused == [5, 7] and full.loc[5, "__error"].count("512") >= 1


def test_rows_within_the_limit_raise_no_input_limit_warning(gw: Gateway) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", InputLimitWarning)
        out = rows(4, "short").gw.decide("{ticket}", QUESTIONS, gateway=gw, budget=10_000, checkpoint=None,
                                         progress=False)
    assert dict(out.run.over_limit) == {"model": "local/decide-e5-small", "limit": 512, "count": 0, "rows": [],
                                        "estimated_tokens": []}
