"""logprobs/top_logprobs on POST /v1/chat/completions through the official openai SDK, against the real
gateway: what LOTUS-like cascades read (issue 26, point 4)."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from tests.support.models import TEXT_MODEL

ASK = [{"role": "user", "content": "Name three colours."}]


def _assert_scored(tokens: list[Any], top: int) -> None:
    for token in tokens:
        assert token.logprob <= 0 and bytes(token.bytes) == token.token.encode("utf-8")
        alternatives = [t.logprob for t in token.top_logprobs]
        assert len(alternatives) == top and all(lp <= 0 for lp in alternatives)
        assert alternatives == sorted(alternatives, reverse=True)
        # the sampled token's probability is at most the most likely one's
        assert not alternatives or token.logprob <= alternatives[0] + 1e-6


def test_chat_logprobs_tokens_join_to_the_answer_with_sorted_alternatives(model: str, client) -> None:
    r = client.chat.completions.create(model=model, messages=ASK, max_tokens=12, logprobs=True, top_logprobs=3)
    choice = r.choices[0]
    tokens = choice.logprobs.content
    assert tokens and "".join(t.token for t in tokens) == choice.message.content
    _assert_scored(tokens, 3)


def test_twenty_alternatives_are_a_distribution_at_most_one(client) -> None:
    r = client.chat.completions.create(model=TEXT_MODEL, messages=ASK, max_tokens=6, logprobs=True,
                                       top_logprobs=20)
    tokens = r.choices[0].logprobs.content
    assert tokens and all(len(t.top_logprobs) == 20 for t in tokens)
    assert all(sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1 + 1e-6 for t in tokens)


def test_streamed_chat_logprobs_join_to_the_streamed_text(model: str, client) -> None:
    stream = client.chat.completions.create(model=model, messages=ASK, max_tokens=12, stream=True,
                                            logprobs=True, top_logprobs=2)
    text, tokens = "", []
    for chunk in stream:
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        if choice.logprobs is not None and choice.logprobs.content:
            tokens.extend(choice.logprobs.content)
    assert text and "".join(t.token for t in tokens) == text
    _assert_scored(tokens, 2)


def test_chat_without_logprobs_answers_logprobs_null(client) -> None:
    r = client.chat.completions.create(model=TEXT_MODEL, messages=ASK, max_tokens=4)
    assert r.choices[0].logprobs is None


@pytest.mark.parametrize(("extra", "param"), [
    ({"logprobs": "yes"}, "logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 2.5}, "top_logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": False, "top_logprobs": 3}, "top_logprobs"),
])
def test_bad_logprobs_fields_are_a_400_naming_the_field(gateway, extra: dict[str, Any], param: str) -> None:
    body = {"model": TEXT_MODEL, "messages": ASK, "max_tokens": 2, **extra}
    r = httpx.post(f"{gateway.base_url}/chat/completions", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == param


def test_logprobs_of_a_json_answer_and_of_each_choice_join_to_their_content(client) -> None:
    person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}, "required": ["name"],
              "additionalProperties": False}
    r = client.chat.completions.create(
        model=TEXT_MODEL, messages=[{"role": "user", "content": "Name a person."}], max_tokens=24, n=2,
        logprobs=True, top_logprobs=1,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": person}})
    assert len(r.choices) == 2
    for choice in r.choices:
        assert "".join(t.token for t in choice.logprobs.content) == choice.message.content
