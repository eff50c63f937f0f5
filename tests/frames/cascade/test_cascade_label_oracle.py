"""A cascade's label oracle reads its labels by the evaluation's reader, before anything is paid (issue 31
points 3 and 10): "Billing" is the option billing, 1-based severities are shifted, "yes"/"no" is a
noul label, and "finance", 7 or a 1/2 coding are refused naming the oracle, with no request sent."""

from __future__ import annotations

import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from tests.support.gateways import RequestLog
from tests.support.messages import QUESTIONS, support_messages


@pytest.fixture(scope="module")
def messages() -> pd.DataFrame:
    return support_messages(40)


def _run(frame: pd.DataFrame, gw: Gateway, question: str, labels: pd.Series, **cascade):
    cascade = gwlab.Cascade(oracle=labels, **{"target": 0.9, "delta": 0.2, "sample": 20, **cascade})
    return frame.gw.decide("{text}", {question: QUESTIONS[question]}, gateway=gw, progress=False,
                           cascade=cascade, checkpoint=None)


@pytest.mark.parametrize(("question", "bad", "shown"), [
    ("team", "finance", "'finance'"), ("severity", 7, "'7'"), ("refund", 2, "2")])
def test_labels_the_reader_cannot_read_are_refused_before_any_request(messages, gw, gateway, question, bad, shown):
    labels = messages[question].astype(object).copy()
    labels.iloc[3] = bad
    log = RequestLog(gateway.db)
    mark = log.mark()
    with pytest.raises(InvalidRequest) as caught:
        _run(messages, gw, question, labels)
    assert caught.value.field == "oracle" and shown in str(caught.value) and question in str(caught.value)
    assert log.settled(mark, "/v1/decisions") == []  # refused before the cheap model was paid


def test_labels_written_another_way_are_delivered_in_the_models_terms(messages, gw):
    team = messages["team"].str.capitalize()  # "Billing" for the option billing
    out = _run(messages, gw, "team", team)
    oracle = out["team__source"] == "oracle"
    assert oracle.any()
    assert (out.loc[oracle, "team__answer"] == messages.loc[oracle, "team"]).all()
    assert set(out["team__answer"].dropna()) <= set(QUESTIONS["team"]["criteria"])


def test_one_based_severities_are_shifted_with_a_warning(messages, gw):
    with pytest.warns(EvaluationWarning, match="1-based"):
        out = _run(messages, gw, "severity", messages["severity"] + 1)
    oracle = out["severity__source"] == "oracle"
    assert oracle.any()
    assert (out.loc[oracle, "severity__answer"].astype(int) == messages.loc[oracle, "severity"]).all()


def test_yes_no_labels_are_a_noul_oracle(messages, gw):
    words = messages["refund"].map({True: "yes", False: "No"})
    out = _run(messages, gw, "refund", words, metric="recall")
    oracle = out["refund__source"] == "oracle"
    assert (out.loc[oracle, "refund__answer"] == messages.loc[oracle, "refund"]).all()
