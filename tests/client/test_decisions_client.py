"""Decisions client: typed answers from the real local gateway, refusal before sending, retry policy.

The live tests run every claim through the sync `Gateway` and the `AsyncGateway`; `httpx.MockTransport`
appears only to inject faults (a 503, a lost answer).
"""

from __future__ import annotations

import httpx
import pytest

from gwlab.errors import InvalidRequest, NotFound
from gwlab.wire.decisions import ChoiceAnswer, NoulAnswer, ScoreAnswer
from tests.support.faces import FACES, Face, logged, open_face
from tests.support.fakes import BASE_URL, CANARY_KEY
from tests.support.models import DECIDE_MODEL

DECIDE = DECIDE_MODEL
QUESTIONS = {
    "billing": {"type": "noul", "instructions": "Is this message about billing or payments?"},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": {"payments": "charges, refunds, invoices", "technical": "bugs, crashes, errors"}},
    "urgency": {"type": "score", "instructions": "How urgent is it?",
                "criteria": ["can wait", "this week", "today"]},
}
STATE = "I was charged twice for my subscription this month, please refund one payment."


def test_decide_returns_typed_answers_for_every_question_type(face: Face):
    result = face.run(face.gw.decide(STATE, QUESTIONS, model=DECIDE))
    assert set(result.answers) == set(QUESTIONS)
    billing, team, urgency = result["billing"], result["team"], result["urgency"]
    assert isinstance(billing, NoulAnswer) and 0.0 <= billing.noul <= 1.0
    assert isinstance(team, ChoiceAnswer) and team.choice == "payments"
    assert set(team.probabilities) == {"payments", "technical"} and 0.0 <= team.confidence <= 1.0
    assert isinstance(urgency, ScoreAnswer) and 0.0 <= urgency.score <= 2.0
    assert urgency.legend == {"0": "can wait", "1": "this week", "2": "today"}
    assert result.input_tokens > 0 and result.request_id and result.raw["answers"]
    row = face.gw.ledger.entries()[-1]
    assert (row.method, row.path, row.family, row.status) == ("POST", "/decisions", "decisions", 200)
    assert row.input_tokens == result.input_tokens and row.model == DECIDE


def test_decisions_create_is_what_decide_calls(face: Face):
    result = face.run(face.gw.decisions.create({"message": STATE}, {"team": QUESTIONS["team"]}, model=DECIDE))
    assert result["team"].choice == "payments" and result.model == DECIDE


@pytest.mark.parametrize(("questions", "field"), [
    ({"team": {"type": "choice", "criteria": {"payments": None}}}, "questions.team.criteria"),
    ({"urgent": {"type": "noul", "criteria": {"yes": "now"}}}, "questions.urgent.criteria.yes"),
    ({"q": {"type": "rank", "instructions": "?"}}, "questions.q.type"),
    ({}, "questions"),
])
def test_an_invalid_request_is_refused_naming_the_field_and_never_sent(face: Face, gateway, questions, field):
    sent_before, ledger_before = logged(gateway.db, "/v1/decisions"), len(face.gw.ledger)
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.decide(STATE, questions, model=DECIDE))
    assert refused.value.field == field
    assert logged(gateway.db, "/v1/decisions") == sent_before  # the gateway saw nothing
    assert len(face.gw.ledger) == ledger_before  # and the client recorded no call


def test_an_unknown_model_is_the_gateway_s_404_with_its_request_id(face: Face):
    with pytest.raises(NotFound) as failed:
        face.run(face.gw.decide(STATE, {"billing": QUESTIONS["billing"]}, model="local/no-such-decider"))
    assert failed.value.status == 404 and failed.value.request_id


# --- retry policy (faults injected) ----------------------------------------------------------------------


ANSWER = {"model": DECIDE, "answers": {"billing": {"type": "noul", "noul": 0.9}},
          "usage": {"input_tokens": 12, "output_tokens": 0}}


@pytest.mark.parametrize("kind", FACES)
@pytest.mark.parametrize("fault", ["503", "lost answer"])
def test_decisions_are_idempotent_so_a_503_or_a_lost_answer_is_resent(kind, fault, fast_retries):
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            if fault == "503":
                return httpx.Response(503, json={"error": {"message": "busy"}})
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return httpx.Response(200, json=ANSWER, headers={"x-request-id": "req_2"})

    with open_face(kind, BASE_URL, CANARY_KEY, http_transport=httpx.MockTransport(handler)) as face:
        result = face.run(face.gw.decide(STATE, {"billing": QUESTIONS["billing"]}, model=DECIDE))
        assert result["billing"].noul == 0.9 and result.request_id == "req_2"
        assert len(sent) == 2 and face.gw.ledger.entries()[-1].retries == 1


def test_decide_without_a_model_uses_the_default_df_gw_decide_and_the_magic_use(face: Face):
    result = face.run(face.gw.decide(STATE, {"billing": QUESTIONS["billing"]}))
    from gwlab.wire.families import FAMILIES
    from gwlab.wire.models import DEFAULT_MODELS

    assert result.model == DEFAULT_MODELS["decisions"] == FAMILIES["decisions"].default_model == DECIDE
