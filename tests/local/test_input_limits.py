"""Over-long input on the text routes: a 400 naming the input field and the limit, never a 500 or a
200 stream that carries an error (the prompt is checked before any stream opens)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.gateways import RunningGateway
from tests.support.models import TEXT_MODEL

TEXT = TEXT_MODEL
# each local text model and its max_input_tokens (SmolLM2's context is served at 4096)
LIMITS = {"local/gemma-3-270m": 2047, "local/smollm2-135m-instruct": 4095}
LONG = "The checkout page crashes whenever I pay. " * 1000  # ~8,000 tokens, over both contexts
CASES = [
    ("/chat/completions", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 5}, "messages"),
    ("/chat/completions", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 5, "stream": True},
     "messages"),
    ("/responses", {"input": LONG, "max_output_tokens": 16}, "input"),
    ("/responses", {"input": LONG, "max_output_tokens": 16, "stream": True}, "input"),
    ("/messages", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 5}, "messages"),
    ("/messages", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 5, "stream": True}, "messages"),
]


@pytest.mark.parametrize("model", LIMITS)
@pytest.mark.parametrize(("path", "body", "param"), CASES)
def test_prompt_over_the_context_is_a_400_naming_the_input_and_the_limit(
        gateway: RunningGateway, path: str, body: dict[str, Any], param: str, model: str) -> None:
    headers = {"Authorization": f"Bearer {gateway.api_key}", "anthropic-version": "2023-06-01"}
    r = httpx.post(f"{gateway.base_url}{path}", json={"model": model, **body}, headers=headers,
                   timeout=httpx.Timeout(60))
    assert r.status_code == 400, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    assert f"'{param}'" in r.text and str(LIMITS[model]) in r.text
    if path != "/messages":
        assert r.json()["error"]["param"] == param


def test_tool_routing_reads_the_head_of_a_message_longer_than_the_decision_window(gateway: RunningGateway) -> None:
    message = "Please tell me the weather in Oslo tomorrow. " + "I am planning a long walk by the fjord. " * 100
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}}}}}
    body = {"model": TEXT, "messages": [{"role": "user", "content": message}], "tools": [tool],
            "tool_choice": "auto", "max_tokens": 8, "temperature": 0}
    r = httpx.post(f"{gateway.base_url}/chat/completions", json=body,
                   headers={"Authorization": f"Bearer {gateway.api_key}"}, timeout=httpx.Timeout(120))
    assert r.status_code == 200, r.text[:300]  # ~900 E5 tokens: over the 512 window, within Gemma's context
    assert r.json()["usage"]["prompt_tokens"] < 2047
