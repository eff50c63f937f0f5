"""One default-model rule: every call that names no model asks its family's default (`DEFAULT_MODELS`).

On the real embedded gateway, sync and async faces alike: chat, responses and messages, whole and streamed,
answer with the text model, as `gw.decide` answers with the decision model. An empty model string is still
refused naming the field: "not given" is None, never a guess from a bad value.
"""

from __future__ import annotations

from typing import Any

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.models import DEFAULT_MODELS
from tests.support.faces import Face

TEXT_DEFAULT = DEFAULT_MODELS["text"]
PROMPT = "Say hello."


def _streamed(face: Face, opened: Any) -> Any:
    stream = face.run(opened)
    return face.run(stream.collect())


def test_chat_create_and_stream_without_a_model_use_the_text_default(face: Face) -> None:
    whole = face.run(face.gw.chat(PROMPT, max_completion_tokens=2))
    streamed = _streamed(face, face.gw.chat.stream(PROMPT, max_completion_tokens=2))
    assert whole.model == streamed.model == TEXT_DEFAULT


def test_responses_create_and_stream_without_a_model_use_the_text_default(face: Face) -> None:
    whole = face.run(face.gw.responses.create(PROMPT, max_output_tokens=2))
    streamed = _streamed(face, face.gw.responses.stream(PROMPT, max_output_tokens=2))
    assert whole.model == streamed.model == TEXT_DEFAULT


def test_messages_create_and_stream_without_a_model_use_the_text_default(face: Face) -> None:
    whole = face.run(face.gw.messages.create(PROMPT, max_tokens=2))
    streamed = _streamed(face, face.gw.messages.stream(PROMPT, max_tokens=2))
    assert whole.model == streamed.model == TEXT_DEFAULT


def test_decisions_create_without_a_model_uses_the_decision_default(face: Face) -> None:
    question = {"type": "noul", "instructions": "Is it urgent?", "criteria": {"true": "now", "false": "later"}}
    result = face.run(face.gw.decisions.create("The site is down.", {"urgent": question}))
    assert result.model == DEFAULT_MODELS["decisions"]


def test_an_empty_model_is_refused_naming_the_field_not_replaced_by_the_default(face: Face) -> None:
    with pytest.raises(InvalidRequest, match="model"):
        face.run(face.gw.chat(PROMPT, model="", max_completion_tokens=2))
