"""A text answer is never empty: the local engine's first token must show something.

The base Gemma ended "Reply with one short friendly sentence." at once (an empty message) for these seeds
of its default sampling, 3 in 40; greedy decoding is checked on both text models too. Seeded requests are
reproducible, so each case fails the same way without the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gwlab import Gateway
from gwlab.wire.models import DEFAULT_MODELS

PROMPT = "Reply with one short friendly sentence."
GEMMA = "local/gemma-3-270m"
EMPTY_BEFORE = [0, 13, 26]  # seeds whose Gemma answer was empty (1 to 3 tokens, then its end)


@pytest.fixture(scope="module")
def gw(gateway: Any) -> Iterator[Gateway]:
    with Gateway(gateway.base_url, gateway.api_key) as client:
        yield client


@pytest.mark.parametrize("seed", EMPTY_BEFORE)
def test_a_sampled_answer_that_ended_at_once_now_has_text(gw: Gateway, seed: int) -> None:
    reply = gw.chat(PROMPT, model=GEMMA, seed=seed, max_completion_tokens=40)
    assert reply.text.strip() and reply.usage.output_tokens > 0
    assert gw.chat(PROMPT, model=GEMMA, seed=seed, max_completion_tokens=40).text == reply.text  # deterministic


@pytest.mark.parametrize("model", [GEMMA, DEFAULT_MODELS["text"]])
def test_a_greedy_answer_has_text_on_every_protocol(gw: Gateway, model: str) -> None:
    assert gw.chat(PROMPT, model=model, temperature=0, max_completion_tokens=40).text.strip()
    assert gw.responses.create(PROMPT, model=model, temperature=0, max_output_tokens=40).text.strip()
    assert gw.messages.create(PROMPT, model=model, temperature=0, max_tokens=40).text.strip()


def test_an_answer_of_one_token_still_shows_something(gw: Gateway) -> None:
    reply = gw.chat(PROMPT, model=GEMMA, seed=EMPTY_BEFORE[0], max_completion_tokens=1)
    assert reply.text.strip() and reply.finish_reason == "length"
