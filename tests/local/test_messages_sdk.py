"""POST /v1/messages through the official anthropic SDK and raw httpx, with both header styles."""

from __future__ import annotations

import json

import anthropic
import httpx
import jsonschema
import pytest

from tests.support.models import TEXT_MODEL

MODEL = TEXT_MODEL  # where the model is not the point (request checks)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"name": "get_weather", "description": "Get the current weather for a city",
          "input_schema": WEATHER}]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Oslo right now?"}]


@pytest.fixture(scope="module")
def client(gateway) -> anthropic.Anthropic:
    # SDK 2.x: Authorization: Bearer and anthropic-version 2026-10-21
    return anthropic.Anthropic(base_url=gateway.api_host, api_key=gateway.api_key, max_retries=0)


def _legacy(gateway, body: dict, version: str | None = "2023-06-01") -> httpx.Response:
    """What SDK 1.x and the spec send: x-api-key and anthropic-version 2023-06-01."""
    headers = {"x-api-key": gateway.api_key, **({"anthropic-version": version} if version else {})}
    return httpx.post(f"{gateway.api_host}/v1/messages", json=body, headers=headers, timeout=120)


def test_message_is_a_text_block_with_usage_and_request_id(model: str, client) -> None:
    m = client.messages.create(model=model, max_tokens=12, system="Answer briefly.",
                               messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert m.id.startswith("msg_") and m.type == "message" and m.role == "assistant" and m.model == model
    assert m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens") and m.stop_sequence is None
    assert m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= 12
    assert m._request_id.startswith("req_")


def test_max_tokens_ends_with_stop_reason_max_tokens(model: str, client) -> None:
    # a prefilled list to continue: a sampled answer (2026-10-21 takes no temperature) could otherwise end at once
    m = client.messages.create(model=model, max_tokens=2,
                               messages=[{"role": "user", "content": "List twenty animals, one per line."},
                                         {"role": "assistant", "content": "1. Dog\n2. Cat\n3."}])
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 2


def test_stop_sequence_ends_the_text_and_is_reported(model: str, gateway) -> None:
    r = _legacy(gateway, {"model": model, "max_tokens": 30, "temperature": 0, "stop_sequences": ["7"],
                          "messages": [{"role": "user", "content": "Count from 1 to 10."},
                                       {"role": "assistant", "content": "1, 2, 3, 4,"}]})
    body = r.json()
    assert r.status_code == 200 and body["stop_reason"] == "stop_sequence" and body["stop_sequence"] == "7"
    assert "7" not in body["content"][0]["text"]


def test_stream_helper_yields_the_text_and_the_final_message(model: str, client) -> None:
    with client.messages.stream(model=model, max_tokens=10,
                                messages=[{"role": "user", "content": "Name a colour."}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0


def test_raw_stream_names_every_event_in_protocol_order(model: str, gateway) -> None:
    body = {"model": model, "max_tokens": 6, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    headers = {"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01"}
    url = f"{gateway.api_host}/v1/messages"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["request-id"].startswith("req_")
        raw = r.read().decode()
    events = []
    for block in filter(None, raw.split("\n\n")):
        name_line, data_line = block.split("\n")
        name, data = name_line.removeprefix("event: "), json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        events.append(data)
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[3:-3]) == {"content_block_delta"}
    assert events[0]["message"]["usage"]["input_tokens"] > 0 and events[0]["message"]["content"] == []
    assert events[-2]["usage"]["output_tokens"] > 0 and events[-2]["delta"]["stop_reason"]


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}],
                         ids=["any", "named"])
def test_forced_tool_choice_gives_a_tool_use_block_whose_input_validates(model: str, client, choice) -> None:
    m = client.messages.create(model=model, max_tokens=40, tools=TOOLS, tool_choice=choice,
                               messages=ASK_WEATHER)
    assert m.stop_reason == "tool_use"
    block = m.content[-1]
    assert block.type == "tool_use" and block.id.startswith("toolu_") and block.name == "get_weather"
    jsonschema.validate(block.input, WEATHER)


def test_tool_choice_none_answers_in_text(model: str, client) -> None:
    m = client.messages.create(model=model, max_tokens=8, tools=TOOLS, tool_choice={"type": "none"},
                               messages=ASK_WEATHER)
    assert all(b.type == "text" for b in m.content) and m.stop_reason != "tool_use"


def test_streamed_tool_use_arrives_as_input_json_deltas(model: str, client) -> None:
    with client.messages.stream(model=model, max_tokens=40, tools=TOOLS, messages=ASK_WEATHER,
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert json.loads(partial) == final.content[0].input
    jsonschema.validate(final.content[0].input, WEATHER)
    assert final.stop_reason == "tool_use"


def test_tool_result_round_trip_is_answered_in_text(model: str, client) -> None:
    messages = [*ASK_WEATHER,
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp_c": 4}'}]}]
    m = client.messages.create(model=model, max_tokens=12, tools=TOOLS, messages=messages)
    assert m.stop_reason in ("end_turn", "max_tokens") and all(b.type == "text" for b in m.content)


def test_x_api_key_with_the_spec_version_works_and_accepts_temperature(model: str, gateway) -> None:
    r = _legacy(gateway, {"model": model, "max_tokens": 4, "temperature": 0.2,
                          "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 200 and r.json()["type"] == "message"
    assert r.headers["request-id"].startswith("req_")


def test_bearer_with_the_2026_version_refuses_temperature(model: str, gateway) -> None:
    r = httpx.post(f"{gateway.api_host}/v1/messages", timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}", "anthropic-version": "2026-10-21"},
                   json={"model": model, "max_tokens": 4, "temperature": 0.2,
                         "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 400
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "temperature" in body["error"]["message"] and body["request_id"] == r.headers["request-id"]


def test_missing_version_header_is_a_400_in_anthropic_shape(model: str, gateway) -> None:
    r = _legacy(gateway, {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
                version=None)
    assert r.status_code == 400
    assert r.json()["type"] == "error" and "anthropic-version" in r.json()["error"]["message"]


def test_unknown_model_is_not_found_and_carries_the_request_id(client) -> None:
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="local/nope", max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert info.value.request_id.startswith("req_")


@pytest.mark.parametrize(("body", "named"), [
    ({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}, "max_tokens"),
    ({"model": MODEL, "max_tokens": "5", "messages": [{"role": "user", "content": "Hi"}]}, "max_tokens"),
    ({"model": MODEL, "max_tokens": 0, "messages": [{"role": "user", "content": "Hi"}]}, "max_tokens"),
    ({"model": MODEL, "max_tokens": 5}, "messages"),
    ({"model": MODEL, "max_tokens": 5, "messages": []}, "messages"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "system", "content": "Hi"}]},
     "messages[0].role"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "x"}}]}]}, "messages[0].content[0].type"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}, "messages[0].content[0].type"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "content": "4"}]}]}, "messages[0].content[0].tool_use_id"),
    ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]}, "messages[0].content[0].input"),
    ({"model": MODEL, "max_tokens": 5, "system": 5, "messages": ASK_WEATHER}, "system"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "tools": [{"name": "f"}]},
     "tools[0].input_schema"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "tools": [{"type": "web_search_20250305"}]},
     "tools[0].type"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "tools": TOOLS,
      "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "tool_choice": {"type": "any"}},
     "tool_choice"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "stop_sequences": "x"}, "stop_sequences"),
    ({"model": MODEL, "max_tokens": 5, "messages": ASK_WEATHER, "temperature": 3}, "temperature"),
    ({"max_tokens": 5, "messages": ASK_WEATHER}, "model"),
])
def test_bad_field_is_a_400_in_anthropic_shape_naming_it(gateway, body, named) -> None:
    r = _legacy(gateway, body)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert named in error["error"]["message"] and error["request_id"].startswith("req_")


@pytest.mark.parametrize(("content", "content_type", "status"), [
    (b"{not json", "application/json", 400), (b"[]", "application/json", 400),
    (b'{"model": "local/gemma-3-270m"}', "text/plain", 415),
])
def test_unreadable_body_is_a_4xx_in_anthropic_shape(gateway, content, content_type, status) -> None:
    r = httpx.post(f"{gateway.api_host}/v1/messages", content=content, timeout=60,
                   headers={"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01",
                            "Content-Type": content_type})
    assert r.status_code == status and r.json()["type"] == "error"
