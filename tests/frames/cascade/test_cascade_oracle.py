"""A cascade whose oracle is a text model (chat, responses, messages) on the real embedded gateway."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.cascade.oracle import CascadeQuestion, Oracle
from gwlab.frames.run.config import RunConfig
from gwlab.frames.specs import DecideSpec
from gwlab.wire.families import FAMILIES
from tests.support.gateways import RequestLog
from tests.support.messages import QUESTIONS, support_messages
from tests.support.models import TEXT_MODEL

TEAM = {"team": QUESTIONS["team"]}


@pytest.fixture(scope="module")
def messages() -> pd.DataFrame:
    return support_messages(12)


def text_cascade(protocol: str) -> gwlab.Cascade:
    return gwlab.Cascade(oracle=TEXT_MODEL, protocol=protocol, target=0.6, delta=0.2, sample=6, max_tokens=48)


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_text_oracle_answers_its_rows_only_with_the_question_options(
        messages: pd.DataFrame, gw: Gateway, gateway, protocol: str) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    out = messages.gw.decide("{text}", TEAM, cascade=text_cascade(protocol), gateway=gw, checkpoint=None,
                             progress=False)
    summary = out.run.cascade
    asked = log.settled(mark, "/v1" + FAMILIES[protocol].path)
    assert summary["oracle_calls"]["total"] == summary["oracle_rows"] > 0 and summary["oracle_sent"] > 0
    assert summary["oracle_sent"] <= len(asked) <= 2 * summary["oracle_sent"]  # at most one re-ask a row
    by_oracle = out.loc[out["team__source"] == "oracle", "team__answer"].dropna()
    assert len(by_oracle) > 0 and set(by_oracle) <= set(QUESTIONS["team"]["criteria"])  # never a guess
    assert summary["oracle"] == f"{TEXT_MODEL} ({protocol})"


def test_resumed_text_oracle_cascade_sends_nothing_twice(messages: pd.DataFrame, gw: Gateway, gateway,
                                                         tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    severity = {"severity": QUESTIONS["severity"]}  # a score: the oracle answers a level's number
    run = dict(cascade=text_cascade("chat"), gateway=gw, checkpoint=tmp_path / "c.sqlite", progress=False)
    first = messages.gw.decide("{text}", severity, **run)
    levels = set(range(len(QUESTIONS["severity"]["criteria"])))
    by_oracle = first.loc[first["severity__source"] == "oracle", "severity__answer"].dropna()
    assert len(by_oracle) > 0 and set(by_oracle) <= levels
    mark = log.mark()
    again = messages.gw.decide("{text}", severity, **run)
    assert log.settled(mark) == [] and again.run.cascade["oracle_sent"] == 0
    assert again.run.cascade["oracle_cached"] == first.run.cascade["oracle_sent"]
    pd.testing.assert_series_equal(again["severity__answer"], first["severity__answer"])


@pytest.mark.parametrize(("arguments", "field"), [
    ({"oracle": "m", "protocol": "videos"}, "protocol"), ({"oracle": "m", "max_tokens": 0}, "max_tokens"),
    ({"oracle": pd.Series([True]), "protocol": "chat"}, "protocol")])
def test_text_oracle_refuses_a_bad_argument_naming_it(arguments: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        gwlab.Cascade(**arguments)
    assert caught.value.field == field


@pytest.mark.parametrize(("oracle", "budget", "covered"), [
    ("m", None, None), ("m", 0, False), ("m", 10_000, None),  # no price measured yet: unknown, unless spent
    ("labels", 0, True)])  # labels cost nothing: any budget covers them
def test_routed_estimate_says_whether_the_budget_left_covers_it(oracle: str, budget, covered,
                                                                messages: pd.DataFrame) -> None:
    cascade = gwlab.Cascade(oracle=messages["team"] if oracle == "labels" else oracle)
    question = CascadeQuestion.of(TEAM, cascade)
    config = RunConfig.of("rows", {"budget": budget})
    oracle = Oracle.of(messages, DecideSpec("{text}", TEAM), question, cascade, config)
    estimate = oracle.estimate(5)
    assert estimate["calls"] == 5 and estimate["within_budget"] is covered
