"""A decision question in words for a text model: the prompt names every outcome, the schema holds the answer."""

from __future__ import annotations

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.decisions_text import ANSWER_FIELD, answer_schema, question_prompt
from gwlab.wire.schema import Schema
from tests.support.messages import QUESTIONS


@pytest.mark.parametrize("qid", ["urgent", "team", "severity"])
def test_prompt_carries_the_state_the_question_and_every_outcome(qid: str) -> None:
    question = QUESTIONS[qid]
    prompt = question_prompt("My card was charged twice.", question, qid)
    assert prompt.startswith("My card was charged twice.\n") and question["instructions"] in prompt
    criteria = question["criteria"]
    described = criteria.values() if isinstance(criteria, dict) else criteria
    assert all(text in prompt for text in described)
    if isinstance(criteria, list):
        assert all(f"{level}: {text}" in prompt for level, text in enumerate(criteria))


def test_noul_without_instructions_is_asked_by_its_described_outcome() -> None:
    prompt = question_prompt("text", {"type": "noul", "criteria": {"true": "The customer is angry."}})
    assert "It is true when: The customer is angry." in prompt and "None" not in prompt


@pytest.mark.parametrize(("qid", "allowed"), [
    ("refund", None), ("team", ["billing", "technical", "shipping", "account", "other"]), ("severity", "levels")])
def test_answer_schema_allows_exactly_the_question_outcomes(qid: str, allowed) -> None:
    schema = Schema.of(answer_schema(QUESTIONS[qid], qid))
    prop = schema.json["properties"][ANSWER_FIELD]
    if allowed is None:
        assert prop["type"] == "boolean"
    elif allowed == "levels":
        assert prop["enum"] == list(range(len(QUESTIONS[qid]["criteria"])))
    else:
        assert prop["enum"] == allowed


def test_an_invalid_question_is_refused_naming_its_field() -> None:
    with pytest.raises(InvalidRequest) as caught:
        answer_schema({"type": "choice", "criteria": {"only": None}}, "team")
    assert caught.value.field.startswith("questions.team")
