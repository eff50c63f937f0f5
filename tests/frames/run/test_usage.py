"""Usage grouped by run, model and endpoint, priced by a configurable table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gwlab.errors import InvalidRequest
from gwlab.frames.run.usage import DEFAULT_PRICES, NO_MODEL, Price, PriceTable, summarize
from tests.support.ledgers import live_ledger
from tests.support.models import DECIDE_MODEL, TEXT_MODEL


def test_decisions_charge_input_tokens_only() -> None:
    table = PriceTable({"m": Price(2.0, 8.0)})
    assert table.cost("m", "/decisions", 1_000_000, 1_000_000) == pytest.approx(2.0)
    assert table.cost("m", "/chat/completions", 1_000_000, 1_000_000) == pytest.approx(10.0)


def test_exact_ids_win_over_globs_and_unknown_models_cost_nan() -> None:
    table = PriceTable({"vendor/*": 1.0, "vendor/big": (5.0, 10.0)})
    assert table.price("vendor/big") == Price(5.0, 10.0) and table.price("vendor/small") == Price(1.0)
    assert math.isnan(table.cost("other", "/responses", 10, 10))
    assert DEFAULT_PRICES.cost("local/decide-e5-small", "/decisions", 10**6) == 0.0


def test_a_malformed_price_names_the_model() -> None:
    with pytest.raises(InvalidRequest, match=r"prices\.m"):
        PriceTable({"m": "cheap"})


def test_summarize_groups_by_run_model_and_endpoint() -> None:
    ledger = pd.DataFrame({
        "time": pd.to_datetime([1, 2, 3, 4], unit="s", utc=True), "path": ["/decisions"] * 3 + ["/responses"],
        "model": ["d"] * 3 + ["t"], "status": pd.array([200, 200, 429, 200], dtype="Int64"),
        "latency_s": [0.01, 0.03, 0.001, 0.5], "run": ["a", "a", "a", "b"],
        "input_tokens": pd.array([10, 20, None, 5], dtype="Int64"),
        "output_tokens": pd.array([0, 0, None, 7], dtype="Int64"),
    })
    table = summarize(ledger, prices={"d": 1e6, "t": (1e6, 1e6)})  # $1 per token, for easy sums
    assert list(table.index) == [("a", "d", "/decisions"), ("b", "t", "/responses")]
    a = table.loc[("a", "d", "/decisions")]
    assert (a["requests"], a["errors"], a["input_tokens"], a["billed_tokens"]) == (3, 1, 30, 30)
    assert a["cost"] == pytest.approx(30.0) and a["latency_ms_p50"] == pytest.approx(10.0)
    b = table.loc[("b", "t", "/responses")]
    assert b["billed_tokens"] == 12 and b["cost"] == pytest.approx(12.0)
    by_run = summarize(ledger, by=("run",))
    assert list(by_run.index) == ["a", "b"]
    assert math.isnan(by_run.loc["a", "cost"])  # no price for model "d": unknown, not free


def test_rows_without_a_model_are_kept_and_shown_as_no_model() -> None:
    # a gw.models() call is logged with no model (NaN in a string column); two models answered after it
    ledger = pd.DataFrame({
        "path": ["/models", "/decisions", "/chat/completions", "/models"],
        "model": [float("nan"), "local/d", "local/t", None], "status": pd.array([200] * 4, dtype="Int64"),
        "input_tokens": pd.array([None, 10, 5, None], dtype="Int64"),
        "output_tokens": pd.array([None, 0, 3, None], dtype="Int64"),
    })
    table = summarize(ledger)
    assert table["requests"].sum() == 4
    assert table.loc[(NO_MODEL, "/models"), "requests"] == 2
    assert table.loc[(NO_MODEL, "/models"), "cost"] == 0.0  # no model, no tokens: nothing billed
    assert table.loc[("local/t", "/chat/completions"), "billed_tokens"] == 8
    assert list(summarize(ledger, by=("model",)).index) == [NO_MODEL, "local/d", "local/t"]


def test_summarize_reads_a_live_ledger_holding_a_models_call_and_two_models(gateway) -> None:
    table = summarize(live_ledger(gateway), by=("model",))
    assert list(table.index) == [NO_MODEL, *sorted([DECIDE_MODEL, TEXT_MODEL])]
    assert table["requests"].tolist() == [1, 1, 1]
