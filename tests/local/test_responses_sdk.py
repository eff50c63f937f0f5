"""POST /v1/responses and GET /v1/responses/{id} through the official openai SDK and raw httpx."""

from __future__ import annotations

import json
import uuid

import httpx
import jsonschema
import openai
import pytest

from tests.support.models import TEXT_MODEL

MODEL = TEXT_MODEL  # where the model is not the point (request checks)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
          "parameters": WEATHER, "strict": True}]
# what a strict client requires on every response object (protocols.md section 3.2)
STRICT_FIELDS = ("id", "object", "created_at", "model", "output", "parallel_tool_calls", "tool_choice",
                 "tools", "error", "incomplete_details", "instructions", "metadata", "temperature", "top_p",
                 "status", "usage", "text", "store", "previous_response_id", "max_output_tokens")


def _post(gateway, body: dict, key: str | None = None) -> httpx.Response:
    return httpx.post(f"{gateway.base_url}/responses", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {key or gateway.api_key}"})


def test_response_is_a_completed_message_with_every_strict_field(model: str, gateway) -> None:
    r = _post(gateway, {"model": model, "input": "What is the capital of France?", "max_output_tokens": 12,
                        "instructions": "Answer briefly.", "metadata": {"run": "t1"}})
    assert r.status_code == 200
    body = r.json()
    assert set(STRICT_FIELDS) <= body.keys()
    assert body["id"].startswith("resp_") and body["object"] == "response" and body["model"] == model
    assert body["instructions"] == "Answer briefly." and body["metadata"] == {"run": "t1"}
    assert body["status"] in ("completed", "incomplete") and body["error"] is None
    item = body["output"][0]
    assert item["type"] == "message" and item["id"].startswith("msg_") and item["role"] == "assistant"
    assert item["content"][0]["type"] == "output_text" and item["content"][0]["annotations"] == []
    usage = body["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_sdk_create_exposes_output_text_and_request_id(model: str, client) -> None:
    r = client.responses.create(model=model, input="Name a fruit.", max_output_tokens=8)
    assert isinstance(r.output_text, str) and r._request_id.startswith("req_")


def test_max_output_tokens_makes_the_response_incomplete(model: str, client) -> None:
    r = client.responses.create(model=model, input="List twenty animals, one per line.", max_output_tokens=3,
                                temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete" and r.usage.output_tokens == 3


def test_stream_helper_numbers_events_from_zero_and_ends_with_completed(model: str, client) -> None:
    # room for the answer to end at a stop sequence: 10 tokens sometimes cut it (response.incomplete); greedy,
    # since a sampled SmolLM2 answer sometimes ran past 160 tokens (1 of 3 repeats)
    with client.responses.stream(model=model, input="Name a colour.", max_output_tokens=160,
                                 temperature=0) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    assert set(kinds[4:-4]) <= {"response.output_text.delta"}
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output_text == deltas == events[-4].text
    item_id = events[2].item.id
    assert all(e.item_id == item_id and e.output_index == 0 and e.content_index == 0 for e in events[3:-2])
    assert final.status == "completed" and final.id == events[0].response.id


def test_streamed_cut_by_max_output_tokens_ends_with_response_incomplete(model: str, client) -> None:
    # greedy: a sampled answer could end within three tokens and complete
    events = list(client.responses.create(model=model, input="Count from one to fifty.", max_output_tokens=3,
                                          temperature=0, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert events[-2].type == "response.output_item.done" and events[-2].item.status == "incomplete"


def test_streamed_function_call_sends_argument_deltas_then_done(model: str, client) -> None:
    stream = client.responses.create(model=model, input="What is the weather in Oslo?", tools=TOOLS,
                                     tool_choice="required", max_output_tokens=40, stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]
    assert "response.function_call_arguments.delta" in kinds
    added = events[2].item
    assert added.type == "function_call" and added.id.startswith("fc_") and added.call_id.startswith("call_")
    assert added.name == "get_weather" and added.arguments == ""
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert deltas == events[-3].arguments == events[-2].item.arguments
    jsonschema.validate(json.loads(deltas), WEATHER)
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_previous_response_id_continues_with_history_but_not_instructions(model: str, client) -> None:
    first = client.responses.create(model=model, input="My name is Ada.", instructions="Be brief.",
                                    max_output_tokens=8)
    second = client.responses.create(model=model, input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=8)
    assert second.previous_response_id == first.id and second.instructions is None
    alone = client.responses.create(model=model, input="What is my name?", max_output_tokens=8)
    # the history (first input and answer) is part of the prompt: it costs input tokens
    assert second.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens


def test_function_call_output_round_trip_answers_in_text(model: str, client) -> None:
    call = client.responses.create(model=model, input="What is the weather in Oslo?", tools=TOOLS,
                                   tool_choice="required", max_output_tokens=40)
    item = call.output[0]
    assert item.type == "function_call" and item.name == "get_weather"
    jsonschema.validate(json.loads(item.arguments), WEATHER)
    answer = client.responses.create(
        model=model, previous_response_id=call.id, tools=TOOLS, max_output_tokens=12,
        input=[{"type": "function_call_output", "call_id": item.call_id, "output": '{"temp_c": 4}'}])
    assert answer.output[0].type == "message" and isinstance(answer.output_text, str)


def test_full_history_with_function_items_is_accepted_without_storage(model: str, client) -> None:
    r = client.responses.create(model=model, store=False, max_output_tokens=8, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {"type": "function_call", "call_id": "call_9", "name": "get_weather",
         "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": '{"temp_c": 4}'}])
    assert r.store is False and r.output[0].type == "message"


def test_text_format_json_schema_output_validates(model: str, client) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"], "additionalProperties": False}
    r = client.responses.create(model=model, input="Paris is in France. Give city and country.",
                                max_output_tokens=40,
                                text={"format": {"type": "json_schema", "name": "place", "schema": schema}})
    assert r.status == "completed" and r.text.format.type == "json_schema"
    jsonschema.validate(json.loads(r.output_text), schema)


def test_retrieve_returns_the_stored_response(model: str, client) -> None:
    made = client.responses.create(model=model, input="Say hi.", max_output_tokens=4)
    got = client.responses.retrieve(made.id)
    assert got.id == made.id and got.output_text == made.output_text


def test_unknown_input_item_is_a_bad_request_naming_the_item(model: str, client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=model, input=[{"role": "user", "content": "hi"},
                                                    {"type": "message", "role": "user", "content": "again"},
                                                    {"type": "banana"}])
    assert info.value.body["param"] == "input[2].type" and "input[2].type" in info.value.message
    assert info.value.request_id.startswith("req_")


def test_unknown_previous_response_id_is_not_found(model: str, client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model=model, input="hi", previous_response_id="resp_doesnotexist")
    assert info.value.body["param"] == "previous_response_id" and info.value.request_id.startswith("req_")


def test_only_the_key_that_made_a_response_can_continue_or_read_it(model: str, gateway, client) -> None:
    made = client.responses.create(model=model, input="Say hi.", max_output_tokens=4)
    other = gateway.create_key(f"responses-other-key-{uuid.uuid4().hex[:8]}")  # names are unique per database
    r = _post(gateway, {"model": model, "input": "again", "previous_response_id": made.id}, key=other)
    assert r.status_code == 404 and r.json()["error"]["param"] == "previous_response_id"
    r = httpx.get(f"{gateway.base_url}/responses/{made.id}", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404


def test_unstored_response_cannot_be_continued(model: str, client) -> None:
    made = client.responses.create(model=model, input="Say hi.", max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=model, input="again", previous_response_id=made.id)


@pytest.mark.parametrize(("body", "param"), [
    ({"model": MODEL}, "input"),
    ({"model": MODEL, "input": 5}, "input"),
    ({"model": MODEL, "input": ["hi"]}, "input[0]"),
    ({"model": MODEL, "input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"model": MODEL, "input": [{"role": "user"}]}, "input[0].content"),
    ({"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"model": MODEL, "input": [{"type": "function_call_output", "output": "4"}]}, "input[0].call_id"),
    ({"model": MODEL, "input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
     "input[0].arguments"),
    ({"model": MODEL, "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"model": MODEL, "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": MODEL, "input": "hi", "tools": [{"type": "function", "parameters": WEATHER}]},
     "tools[0].name"),
    ({"model": MODEL, "input": "hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
     "tool_choice.name"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}},
     "text.format.schema"),
    ({"model": MODEL, "input": "hi", "max_output_tokens": -1}, "max_output_tokens"),
    ({"model": MODEL, "input": "hi", "temperature": "hot"}, "temperature"),
    ({"model": MODEL, "input": "hi", "metadata": {"a": 1}}, "metadata"),
    ({"model": MODEL, "input": "hi", "store": "yes"}, "store"),
    ({"model": MODEL, "input": "hi", "previous_response_id": 5}, "previous_response_id"),
    ({"model": MODEL, "input": "hi", "instructions": ["x"]}, "instructions"),
])
def test_bad_field_is_a_400_naming_it(gateway, body, param) -> None:
    r = _post(gateway, body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param and param in r.json()["error"]["message"]


@pytest.mark.parametrize(("content", "content_type", "status"), [
    (b"{not json", "application/json", 400), (b'"hi"', "application/json", 400),
    (b'{"model": "local/gemma-3-270m", "input": "hi"}', "application/x-www-form-urlencoded", 415),
])
def test_unreadable_body_is_a_4xx(gateway, content, content_type, status) -> None:
    r = httpx.post(f"{gateway.base_url}/responses", content=content, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}", "Content-Type": content_type})
    assert r.status_code == status and r.json()["error"]["message"]
