"""Client and gateway refuse the same text-family bodies with the same field and message.

Each body goes twice: through the client's validator (the `build_request` that `gw.chat`, `gw.responses`
and `gw.messages` run before sending) and, as raw JSON over httpx, to the real embedded gateway, so the
client cannot hide the server's answer. Both run the one validator in gwlab/wire/<family>.py; these tables
fail if a rule is written again on one side only.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import chat, messages, responses
from tests.support.models import TEXT_MODEL

MODEL = TEXT_MODEL
HI = [{"role": "user", "content": "hi"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}
FLAT_TOOL = {"type": "function", "name": "get_weather", "parameters": WEATHER}
CUSTOM_TOOL = {"name": "get_weather", "input_schema": WEATHER}

CHAT_BAD = [
    ({"messages": None}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [5]}, "messages[0]"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, "messages[0].content[0].text"),
    ({"messages": [{"role": "tool", "content": "4 C"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "assistant", "content": None}]}, "messages[0].content"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]},
     "messages[0].tool_calls[0].function"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}]},
     "messages[0].tool_calls[0].id"),
    ({"tools": [{"function": {"name": "f"}}]}, "tools[0].type"),
    ({"tools": [{"type": "function", "name": "f"}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
    ({"tools": [CHAT_TOOL, CHAT_TOOL]}, "tools[1].function.name"),
    ({"tools": [CHAT_TOOL], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [CHAT_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name"),
    ({"tools": [CHAT_TOOL], "tool_choice": {"type": "allowed_tools",
                                            "allowed_tools": {"mode": "maybe", "tools": []}}},
     "tool_choice.allowed_tools.mode"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format.json_schema.name"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}},
     "response_format.json_schema.schema"),
    ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ({"max_tokens": "ten"}, "max_tokens"),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens"),
    ({"temperature": 2.5}, "temperature"),
    ({"top_p": -0.1}, "top_p"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"seed": "7"}, "seed"),
    ({"stop": [1]}, "stop"),
    ({"stop": ["x"] * 17}, "stop"),
    ({"n": 0}, "n"),
    ({"logprobs": "yes"}, "logprobs"),
]

RESPONSES_BAD = [
    ({"input": None}, "input"),
    ({"input": ""}, "input"),
    ({"input": 5}, "input"),
    ({"input": []}, "input"),
    ({"input": ["hi"]}, "input[0]"),
    ({"input": [{"content": "no role"}]}, "input[0].type"),
    ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"input": [{"role": "user"}]}, "input[0].content"),
    ({"input": [{"role": "user", "content": [{"type": "input_text"}]}]}, "input[0].content[0].text"),
    ({"input": [{"type": "function_call_output", "output": "4"}]}, "input[0].call_id"),
    ({"input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments"),
    ({"tools": [{"name": "f"}]}, "tools[0].type"),
    ({"tools": [CHAT_TOOL]}, "tools[0].function"),
    ({"tools": [{"type": "function", "parameters": WEATHER}]}, "tools[0].name"),
    ({"tools": [FLAT_TOOL, FLAT_TOOL]}, "tools[1].name"),
    ({"tools": [FLAT_TOOL], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
    ({"tools": [FLAT_TOOL], "tool_choice": {"type": "allowed_tools", "mode": "auto",
                                            "tools": [{"type": "function", "name": "nope"}]}},
     "tool_choice.tools[0].name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
    ({"text": "json"}, "text"),
    ({"max_output_tokens": -1}, "max_output_tokens"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 2}, "top_p"),
    ({"metadata": {"a": 1}}, "metadata"),
    ({"metadata": {str(i): "v" for i in range(17)}}, "metadata"),
    ({"store": "yes"}, "store"),
    ({"truncation": "middle"}, "truncation"),
    ({"previous_response_id": 5}, "previous_response_id"),
    ({"instructions": ["x"]}, "instructions"),
]

MESSAGES_BAD = [
    ({"max_tokens": None}, "max_tokens"),
    ({"max_tokens": "5"}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": None}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "system", "content": "Hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "4"}]}]},
     "messages[0].content[0].tool_use_id"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                                      "input": "x"}]}]}, "messages[0].content[0].input"),
    ({"system": 5}, "system"),
    ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ({"tools": [{"name": "a b", "input_schema": WEATHER}]}, "tools[0].name"),
    ({"tools": [CUSTOM_TOOL, CUSTOM_TOOL]}, "tools[1].name"),
    ({"tools": [CUSTOM_TOOL], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"tools": [CUSTOM_TOOL], "tool_choice": "auto"}, "tool_choice"),
    ({"tools": [CUSTOM_TOOL], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"stop_sequences": "x"}, "stop_sequences"),
    ({"temperature": 1.5}, "temperature"),
    ({"top_k": -1}, "top_k"),
    ({"thinking": True}, "thinking"),
]


def _client_refusal(build: Any, body: dict[str, Any], first: str, *keywords: str) -> InvalidRequest:
    """What the client's validator says about `body` (the refusal `gw.<family>.create` raises): the body
    taken apart into the builder's arguments, `first` positional and `keywords` required by name."""
    params = {k: v for k, v in body.items() if k not in (first, *keywords)}
    with pytest.raises(InvalidRequest) as info:
        build(body.get(first), **{k: body.get(k) for k in keywords}, **params)
    return info.value


def _gateway_refusal(gateway: Any, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, str]:
    """(param, message) of the gateway's 400 for the raw body; the messages shape has no param."""
    r = httpx.post(f"{gateway.base_url}{path}", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}", **headers})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    return error.get("param", ""), error["message"]


@pytest.mark.parametrize(("change", "field"), CHAT_BAD, ids=[f for _, f in CHAT_BAD])
def test_chat_client_and_gateway_refuse_a_bad_body_naming_the_same_field(gateway, change, field) -> None:
    body = {"model": MODEL, "messages": HI, **change}
    refused = _client_refusal(chat.build_request, body, "messages", "model")
    assert refused.field == field
    assert _gateway_refusal(gateway, "/chat/completions", body, {}) == (field, str(refused))


@pytest.mark.parametrize(("change", "field"), RESPONSES_BAD, ids=[f for _, f in RESPONSES_BAD])
def test_responses_client_and_gateway_refuse_a_bad_body_naming_the_same_field(gateway, change, field) -> None:
    body = {"model": MODEL, "input": "hi", **change}
    refused = _client_refusal(responses.build_request, body, "input", "model")
    assert refused.field == field
    assert _gateway_refusal(gateway, "/responses", body, {}) == (field, str(refused))


@pytest.mark.parametrize(("change", "field"), MESSAGES_BAD, ids=[f for _, f in MESSAGES_BAD])
def test_messages_client_and_gateway_refuse_a_bad_body_naming_the_same_field(gateway, change, field) -> None:
    body = {"model": MODEL, "max_tokens": 5, "messages": HI, **change}
    refused = _client_refusal(messages.build_request, body, "messages", "model", "max_tokens")
    assert refused.field == field
    _, message = _gateway_refusal(gateway, "/messages", body, {"anthropic-version": "2023-06-01"})
    assert message == str(refused)
