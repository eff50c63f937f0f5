"""POST /v1/chat/completions through the official openai SDK and raw httpx, against the real gateway."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from tests.support.models import TEXT_MODEL

MODEL = TEXT_MODEL  # where the model is not the point (request checks)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}
TIME = {"type": "object", "properties": {"timezone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
        "required": ["timezone"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                      "description": "Get the current weather for a city"}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME,
                                      "description": "Get the current time in a timezone"}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Oslo right now?"}]


def _assert_valid_call(call: Any) -> None:
    assert call.type == "function" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_chat_completion_returns_assistant_text_with_usage_and_request_id(model: str, client) -> None:
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model=model, max_tokens=12, messages=messages)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.model == model
    choice = r.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length") and choice.message.tool_calls is None
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r._request_id.startswith("req_")


def test_max_completion_tokens_cuts_the_answer_with_finish_reason_length(model: str, client) -> None:
    messages = [{"role": "user", "content": "List twenty animals, one per line."}]
    r = client.chat.completions.create(model=model, max_completion_tokens=3, messages=messages, temperature=0)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3


def test_streamed_chat_sends_role_first_then_content_then_finish_then_usage(model: str, client) -> None:
    stream = client.chat.completions.create(model=model, max_tokens=10, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "Name a colour."}])
    chunks = list(stream)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    finish = chunks[-2].choices[0]
    assert finish.finish_reason in ("stop", "length") and finish.delta.content is None
    assert all(c.usage is None for c in chunks[:-1])
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_stream_on_the_wire_ends_with_done_and_has_no_usage_without_include_usage(model: str, gateway) -> None:
    body = {"model": model, "max_tokens": 4, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    with httpx.stream("POST", f"{gateway.base_url}/chat/completions", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {gateway.api_key}"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(e[6:]) for e in events[:-1]]
    assert all("usage" not in p for p in payloads)
    assert payloads[-1]["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}],
                         ids=["required", "named"])
def test_forced_tool_choice_returns_a_call_whose_arguments_validate(model: str, client, choice) -> None:
    r = client.chat.completions.create(model=model, messages=ASK_WEATHER, tools=TOOLS, tool_choice=choice,
                                       max_tokens=40)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    assert len(c.message.tool_calls) == 1
    _assert_valid_call(c.message.tool_calls[0])
    if isinstance(choice, dict):
        assert c.message.tool_calls[0].function.name == "get_time"


def test_tool_choice_none_answers_in_text_even_when_a_tool_fits(model: str, client) -> None:
    r = client.chat.completions.create(model=model, messages=ASK_WEATHER, tools=TOOLS, tool_choice="none",
                                       max_tokens=8)
    assert r.choices[0].message.tool_calls is None and isinstance(r.choices[0].message.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")


def test_tool_choice_auto_routes_a_weather_question_to_the_weather_tool(model: str, client) -> None:
    r = client.chat.completions.create(model=model, messages=ASK_WEATHER, tools=TOOLS, max_tokens=40)
    calls = r.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    _assert_valid_call(calls[0])


def test_tool_choice_auto_answers_small_talk_in_text(model: str, client) -> None:
    r = client.chat.completions.create(model=model, tools=TOOLS, tool_choice="auto", max_tokens=8,
                                       messages=[{"role": "user", "content": "Hello! How are you?"}])
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content is not None


def test_streamed_tool_call_arrives_as_indexed_fragments_that_join_into_valid_arguments(model: str, client) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    stream = client.chat.completions.create(model=model, messages=ASK_WEATHER, tools=TOOLS, stream=True,
                                            tool_choice=named, max_tokens=40)
    fragments = [tc for chunk in stream for c in chunk.choices for tc in (c.delta.tool_calls or [])]
    first, rest = fragments[0], fragments[1:]
    assert first.index == 0 and first.id.startswith("call_") and first.type == "function"
    assert first.function.name == "get_weather" and first.function.arguments == ""
    assert rest and all(f.index == 0 and f.id is None and f.function.name is None for f in rest)
    jsonschema.validate(json.loads("".join(f.function.arguments for f in rest)), WEATHER)


def test_stream_helper_accumulates_a_tool_call(model: str, client) -> None:
    with client.chat.completions.stream(model=model, messages=ASK_WEATHER, tools=TOOLS,
                                        tool_choice="required", max_tokens=40) as stream:
        final = stream.get_final_completion()
    _assert_valid_call(final.choices[0].message.tool_calls[0])


def test_tool_result_in_history_is_answered_in_text(model: str, client) -> None:
    history = [*ASK_WEATHER,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 4, "sky": "cloudy"}'}]
    r = client.chat.completions.create(model=model, messages=history, tools=TOOLS, max_tokens=12)
    assert r.choices[0].message.tool_calls is None and isinstance(r.choices[0].message.content, str)


def test_response_format_json_schema_output_validates(model: str, client) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    messages = [{"role": "user", "content": "Ada Lovelace was 36. Give name and age."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
    r = client.chat.completions.create(model=model, max_tokens=40, messages=messages, response_format=fmt)
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_json_object_response_format_returns_a_json_object(model: str, client) -> None:
    r = client.chat.completions.create(model=model, max_tokens=40, response_format={"type": "json_object"},
                                       messages=[{"role": "user", "content": "Describe a cat in JSON."}])
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:
        assert r.choices[0].message.content.startswith("{")


def test_n_returns_one_choice_per_index(model: str, client) -> None:
    r = client.chat.completions.create(model=model, n=2, max_tokens=4,
                                       messages=[{"role": "user", "content": "Say hi."}])
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.finish_reason in ("stop", "length") for c in r.choices)
    assert 0 < r.usage.completion_tokens <= 8


def test_unknown_model_is_not_found_and_carries_the_request_id(client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="local/nope", messages=[{"role": "user", "content": "Hi"}])
    assert info.value.request_id.startswith("req_")
    assert info.value.body["param"] == "model"


@pytest.mark.parametrize(("body", "param"), [
    ({"model": MODEL}, "messages"),
    ({"model": MODEL, "messages": []}, "messages"),
    ({"model": MODEL, "messages": "hi"}, "messages"),
    ({"model": MODEL, "messages": ["hi"]}, "messages[0]"),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": MODEL, "messages": [{"role": "user"}]}, "messages[0].content"),
    ({"model": MODEL, "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages[0].content[0].type"),
    ({"model": MODEL, "messages": [{"role": "tool", "content": "4 C"}]}, "messages[0].tool_call_id"),
    ({"model": MODEL, "messages": [{"role": "assistant"}]}, "messages[0].content"),
    ({"model": MODEL, "messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]},
     "messages[0].tool_calls[0].function"),
    ({"model": MODEL, "messages": ASK_WEATHER, "max_tokens": "ten"}, "max_tokens"),
    ({"model": MODEL, "messages": ASK_WEATHER, "max_completion_tokens": 0}, "max_completion_tokens"),
    ({"model": MODEL, "messages": ASK_WEATHER, "temperature": 5}, "temperature"),
    ({"model": MODEL, "messages": ASK_WEATHER, "n": 0}, "n"),
    ({"model": MODEL, "messages": ASK_WEATHER, "n": 99}, "n"),
    ({"model": MODEL, "messages": ASK_WEATHER, "stop": [1]}, "stop"),
    ({"model": MODEL, "messages": ASK_WEATHER, "stream": "yes"}, "stream"),
    ({"model": MODEL, "messages": ASK_WEATHER, "stream_options": {"include_usage": True}}, "stream_options"),
    ({"model": MODEL, "messages": ASK_WEATHER, "tools": [{"type": "custom", "custom": {"name": "x"}}]},
     "tools[0].type"),
    ({"model": MODEL, "messages": ASK_WEATHER, "tools": [{"type": "function", "function": {"name": "a b"}}]},
     "tools[0].function.name"),
    ({"model": MODEL, "messages": ASK_WEATHER,
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"required": 3}}}]},
     "tools[0].function.parameters"),
    ({"model": MODEL, "messages": ASK_WEATHER, "tools": TOOLS,
      "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"model": MODEL, "messages": ASK_WEATHER, "tool_choice": "required"}, "tool_choice"),
    ({"model": MODEL, "messages": ASK_WEATHER, "response_format": {"type": "yaml"}}, "response_format.type"),
    ({"model": MODEL, "messages": ASK_WEATHER, "response_format": {"type": "json_schema", "json_schema": {}}},
     "response_format.json_schema.name"),
    ({"model": MODEL, "messages": ASK_WEATHER, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"messages": ASK_WEATHER}, "model"),
])
def test_bad_field_is_a_400_naming_it(gateway, body, param) -> None:
    r = httpx.post(f"{gateway.base_url}/chat/completions", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and param in error["message"]
    assert r.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize(("content", "content_type", "status", "param"), [
    (b"{not json", "application/json", 400, "body"),
    (b"[1, 2]", "application/json", 400, "body"),
    (b'{"model": "local/gemma-3-270m"}', "text/plain", 415, "Content-Type"),
])
def test_unreadable_body_is_a_4xx_naming_it(gateway, content, content_type, status, param) -> None:
    r = httpx.post(f"{gateway.base_url}/chat/completions", content=content, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}", "Content-Type": content_type})
    assert r.status_code == status and r.json()["error"]["param"] == param


def test_missing_key_is_401_before_the_body_is_read(gateway) -> None:
    r = httpx.post(f"{gateway.base_url}/chat/completions", content=b"{oops", timeout=60,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 401
