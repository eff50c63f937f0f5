"""A cascade's summary is a typed result built once when the cascade ends (issue 32 point 3): frozen, its
parts typed (oracle calls, the routed rows' estimate, a pilot's), read by attribute and, as the dicts it
replaced were, by key; the run summary of a cascade's frame is the proxy's run plus it."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

import gwlab
from gwlab.frames.cascade.spec import DecisionOracle, LabelsOracle, TextOracle
from gwlab.frames.cascade.summary import (
    CascadeRunSummary,
    CascadeSummary,
    OracleCalls,
    OracleSpend,
    RoutedEstimate,
)
from gwlab.frames.run.outcome import RunSummary
from gwlab.stats.cascade import Threshold


def _summary() -> CascadeSummary:
    cascade = gwlab.Cascade(oracle="m", target=0.8, delta=0.1)
    threshold = Threshold(value=0.7, estimate=0.9, bound=0.8, sampled=40, successes=36, trials=40)
    return CascadeSummary.of(cascade, threshold, 100, 50, (40, 10), OracleSpend("m", 50, 0, 0.25))


def test_a_cascade_summary_is_typed_frozen_and_counts_as_the_cascade_did() -> None:
    s = _summary()
    assert s.oracle_calls == OracleCalls(sampled=40, routed=10, total=50) and s.oracle_rows == 50
    assert s.saving == pytest.approx(2.0) and s.all_oracle_cost == pytest.approx(0.5)
    low, high = s.interval
    assert low < 0.9 < high and s.certified and s.oracle == "m"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.threshold = 0.1  # type: ignore[misc]


def test_a_cascade_summary_reads_by_key_as_the_dict_it_replaced() -> None:
    s = dataclasses.replace(_summary(), routed_estimate=RoutedEstimate(10, 120.0, 0.05, False))
    assert s["oracle_calls"]["total"] == s.oracle_calls.total == 50
    assert s["routed_estimate"]["within_budget"] is False and s.get("pilot") is None and "note" in s
    assert dict(s)["threshold"] == 0.7
    with pytest.raises(KeyError):
        s["nonsense"]
    assert "over the budget left" in s.text()


def test_the_frame_s_run_summary_is_the_proxy_s_run_and_the_cascade_s_in_its_text_and_attrs() -> None:
    run = RunSummary(rows=100, sent=100, model="local/decide-e5-small", endpoint="/v1/decisions")
    both = CascadeRunSummary.of(run, _summary())
    assert isinstance(both, RunSummary) and both.rows == 100 and both.cascade == _summary()
    assert "cascade (accuracy >= 0.8" in both.text() and "cascade" not in run.text()
    plain = dataclasses.asdict(both)  # what `.attrs["gwlab_run"]` keeps: plain data
    assert plain["cascade"]["oracle_calls"] == {"sampled": 40, "routed": 10, "total": 50}


def test_a_cascade_s_oracle_is_one_typed_object_whichever_way_it_was_given() -> None:
    labels = pd.Series([True, False])
    assert isinstance(gwlab.Cascade(oracle=labels).oracle, LabelsOracle)
    assert gwlab.Cascade(oracle="m").oracle == DecisionOracle("m")
    chat = gwlab.Cascade(oracle="m", protocol="chat", max_tokens=64)
    assert chat.oracle == TextOracle("m", "chat", 64) and chat.oracle.name == "m (chat)"
    typed = gwlab.Cascade(oracle=gwlab.TextOracle("m", "messages"))
    assert typed.protocol == "messages" and typed.max_tokens == typed.oracle.max_tokens
    with pytest.raises(gwlab.InvalidRequest) as refused:
        gwlab.Cascade(oracle=labels, protocol="chat")
    assert refused.value.field == "protocol"
    with pytest.raises(gwlab.InvalidRequest) as refused:
        gwlab.TextOracle("m", "decisions")
    assert refused.value.field == "protocol"
    assert math.isnan(CascadeSummary.of(gwlab.Cascade(oracle="m"), Threshold(math.inf, math.nan, math.nan, 0, 0, 0),
                                        0, 0, (0, 0), OracleSpend("m", 0, 0, 0.0)).interval[0])
