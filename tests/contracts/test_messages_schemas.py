"""The messages protocol, as far as a public schema allows: no official Anthropic OpenAPI document is
public, so bodies are checked against schemas derived from the typed models of the `anthropic` SDK
installed here, with every object closed so unknown fields are reported (tests/support/contracts.py).

Both ways: the requests the client sends (recorded on their way to the real embedded gateway) against
the SDK's request TypedDicts, and the gateway's messages, stream events and error bodies against its
response models. `ping` has no SDK type: its documented shape is exactly {"type": "ping"}.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

from gwlab import Gateway
from gwlab.wire.limits import ANTHROPIC_VERSION
from gwlab.wire.messages import SAMPLING_FIELDS
from tests.support.contracts import Recording, anthropic_violations, sse_events

MODEL = "local/gemma-3-270m"
ASK = [{"role": "user", "content": "What is the weather in Oslo right now?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"name": "get_weather", "description": "Get the current weather for a city", "input_schema": WEATHER}]
ROUND_TRIP = [*ASK, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                      "input": {"city": "Oslo"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "4 C"}]}]
BODIES = {
    "plain": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "system": "Answer briefly."},
    "stop_sequence": {"messages": ASK, "max_tokens": 24, "stop_sequences": ["."], "temperature": 0.5},
    "tool_use": {"messages": ASK, "max_tokens": 40, "tools": TOOLS, "tool_choice": {"type": "any"}},
    "tool_result": {"messages": ROUND_TRIP, "max_tokens": 8, "tools": TOOLS},
}
# every stream has these; a forced tool call also always opens a block (a text answer may be empty)
LIFECYCLE = {"message_start", "message_delta", "message_stop"}
BLOCK_EVENTS = {"content_block_start", "content_block_delta", "content_block_stop"}


def _headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


def _valid(found: list[str]) -> None:
    assert not found, "\n".join(dict.fromkeys(found))


def _event_violations(event: dict[str, Any]) -> list[str]:
    if event.get("type") == "ping":
        return [] if event == {"type": "ping"} else [f"ping event carries more than its type: {event}"]
    return anthropic_violations(event, "RawMessageStreamEvent")


@pytest.mark.parametrize("case", BODIES)
def test_gateway_messages_match_the_anthropic_sdk_types(gateway, case: str) -> None:
    r = httpx.post(f"{gateway.api_host}/v1/messages", json={"model": MODEL, **BODIES[case]},
                   headers=_headers(gateway.api_key), timeout=180)
    assert r.status_code == 200, r.text
    _valid(anthropic_violations(r.json(), "Message"))


@pytest.mark.parametrize("case", BODIES)
def test_every_gateway_messages_stream_event_matches_the_anthropic_sdk_types(gateway, case: str) -> None:
    body = {"model": MODEL, **BODIES[case], "stream": True}
    with httpx.stream("POST", f"{gateway.api_host}/v1/messages", json=body, headers=_headers(gateway.api_key),
                      timeout=180) as r:
        assert r.status_code == 200, r.read()
        events = list(sse_events(r.iter_lines()))
    assert LIFECYCLE | (BLOCK_EVENTS if case == "tool_use" else set()) <= {event["type"] for event in events}
    _valid([v for event in events for v in _event_violations(event)])


ERRORS = {  # body, headers, expected status
    "unknown_model": ({"model": "local/nope", "max_tokens": 5, "messages": ASK}, None, 404),
    "bad_field": ({"model": MODEL, "max_tokens": 0, "messages": ASK}, None, 400),
    "missing_version": ({"model": MODEL, "max_tokens": 5, "messages": ASK}, {"anthropic-version": ""}, 400),
    "wrong_key": ({"model": MODEL, "max_tokens": 5, "messages": ASK}, {"x-api-key": "gwk-wrong-contract-key"},
                  401),
}


@pytest.mark.parametrize("case", ERRORS)
def test_gateway_messages_error_bodies_match_the_anthropic_sdk_types(gateway, case: str) -> None:
    body, headers, status = ERRORS[case]
    sent = {k: v for k, v in {**_headers(gateway.api_key), **(headers or {})}.items() if v}
    r = httpx.post(f"{gateway.api_host}/v1/messages", json=body, headers=sent, timeout=60)
    assert r.status_code == status, r.text
    _valid(anthropic_violations(r.json(), "ErrorResponse"))


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


CLIENT_CASES: dict[str, Callable[[Gateway], Any]] = {
    "plain": lambda gw: gw.messages.create("Hi", model=MODEL, max_tokens=8, system="Answer briefly."),
    "stream": lambda gw: _drain(gw.messages.stream(ASK, model=MODEL, max_tokens=8)),
    "sampling_and_stops": lambda gw: gw.messages.create(ASK, model=MODEL, max_tokens=24, temperature=0.5, top_p=0.9,
                                                        stop_sequences=["."], metadata={"user_id": "analyst-1"}),
    "tools": lambda gw: gw.messages.create(ASK, model=MODEL, max_tokens=40, tools=TOOLS,
                                           tool_choice={"type": "any"}),
    "tool_result": lambda gw: gw.messages.create(ROUND_TRIP, model=MODEL, max_tokens=8, tools=TOOLS),
    "frames_messages": lambda gw: pd.DataFrame({"q": ["Hi", "Name a fruit."]}).gw.messages(
        "{q}", system="Be brief.", max_tokens=8, params={"tools": TOOLS}, gateway=gw, checkpoint=False,
        progress=False),
}


@pytest.fixture
def recorded(gateway) -> Iterator[tuple[Gateway, Recording]]:
    recording = Recording()
    with Gateway(gateway.base_url, gateway.api_key, http_transport=recording) as gw:
        yield gw, recording


@pytest.mark.parametrize("case", CLIENT_CASES)
def test_every_messages_request_the_client_sends_matches_the_anthropic_sdk_types(recorded, case: str) -> None:
    gw, recording = recorded
    CLIENT_CASES[case](gw)
    sent = [(httpx.Response(200, content=body).json(), headers)
            for (_, path, body), headers in zip(recording.sent, recording.headers, strict=True)
            if path == "/v1/messages"]
    assert sent, recording.sent
    assert {headers["anthropic-version"] for _, headers in sent} == {ANTHROPIC_VERSION}
    # the SDK's types describe anthropic-version 2026-10-21, which dropped the sampling fields; gwlab sends
    # ANTHROPIC_VERSION (2023-06-01), under which they are valid, so they are left out of the check
    bodies = [{k: v for k, v in body.items() if k not in SAMPLING_FIELDS} for body, _ in sent]
    names = ["MessageCreateParamsStreaming" if body.get("stream") else "MessageCreateParamsNonStreaming"
             for body in bodies]
    _valid([v for body, name in zip(bodies, names, strict=True) for v in anthropic_violations(body, name)])
