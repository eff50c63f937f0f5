"""Responses wire: request body, typed items, and the stream state machine (protocols.md §3)."""

from __future__ import annotations

import json

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import responses
from gwlab.wire.sse import UnknownEvent, decode


def sse(*events: dict) -> bytes:
    out = []
    for seq, event in enumerate(events):
        payload = {"sequence_number": seq, **event}
        out.append(f"event: {event['type']}\ndata: {json.dumps(payload)}\n\n")
    return "".join(out).encode()


MSG = {"id": "msg_gw001", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
PART = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
DONE_PART = {**PART, "text": "Hi there"}
RESPONSE = {"id": "resp_gw001", "object": "response", "status": "in_progress", "model": "gw-echo-1",
            "output": [], "usage": None}
FINAL = {**RESPONSE, "status": "completed",
         "output": [{**MSG, "status": "completed", "content": [DONE_PART]}],
         "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}}
ADDR = {"item_id": "msg_gw001", "output_index": 0, "content_index": 0}

# protocols.md §3.6, simple text answer [verified]
TEXT_EVENTS = [
    {"type": "response.created", "response": RESPONSE},
    {"type": "response.in_progress", "response": RESPONSE},
    {"type": "response.output_item.added", "output_index": 0, "item": MSG},
    {"type": "response.content_part.added", **ADDR, "part": PART},
    {"type": "response.output_text.delta", **ADDR, "delta": "Hi", "logprobs": []},
    {"type": "response.output_text.delta", **ADDR, "delta": " there", "logprobs": []},
    {"type": "response.output_text.done", **ADDR, "text": "Hi there", "logprobs": []},
    {"type": "response.content_part.done", **ADDR, "part": DONE_PART},
    {"type": "response.output_item.done", "output_index": 0, "item": FINAL["output"][0]},
    {"type": "response.completed", "response": FINAL},
]

FC = {"id": "fc_gw001", "type": "function_call", "status": "in_progress", "call_id": "call_gw9",
      "name": "get_weather", "arguments": ""}
FC_EVENTS = [
    {"type": "response.created", "response": RESPONSE},
    {"type": "response.output_item.added", "output_index": 0, "item": FC},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_gw001", "output_index": 0,
     "delta": '{"city":'},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_gw001", "output_index": 0,
     "delta": '"Oslo"}'},
]


def accumulate(payload: bytes) -> responses.ResponsesAccumulator:
    acc = responses.ResponsesAccumulator()
    for event in decode(payload):
        acc.add(event)
    return acc


def test_build_request_omits_unset_parameters_and_keeps_instructions_explicit() -> None:
    body = responses.build_request("hi", model="m", instructions=None, previous_response_id="resp_1")
    assert body == {"model": "m", "input": "hi", "previous_response_id": "resp_1"}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"input": "", "model": "m"}, "input"),
    ({"input": [{"type": "function_call_output", "output": "x"}], "model": "m"}, "input[0].call_id"),
    ({"input": "x", "model": "m", "tools": [{"type": "function", "function": {"name": "f"}}]},
     "tools[0].function"),
    ({"input": "x", "model": None}, "model"),
])
def test_build_request_names_the_invalid_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        responses.build_request(**kwargs)
    assert info.value.field == field


def test_text_stream_completes_only_at_response_completed() -> None:
    acc = accumulate(sse(*TEXT_EVENTS[:-1]))
    assert acc.text == "Hi there" and not acc.complete and acc.status == "in_progress"
    acc.add(decode(sse(*TEXT_EVENTS))[-1])
    assert acc.complete and acc.usage.total_tokens == 15 and acc.result().text == "Hi there"


def test_deltas_are_assembled_by_output_and_content_index() -> None:
    acc = accumulate(sse(*TEXT_EVENTS[:6]))
    result = acc.result()
    assert result.text == "Hi there" and result.status == "in_progress"
    assert [e.text for e in acc.events] == ["", "", "", "", "Hi", " there"]


def test_function_call_arguments_are_assembled() -> None:
    acc = accumulate(sse(*FC_EVENTS))
    [call] = acc.tool_calls
    assert (call.call_id, call.name, call.parsed_arguments()) == ("call_gw9", "get_weather", {"city": "Oslo"})
    assert call.output("4C") == {"type": "function_call_output", "call_id": "call_gw9", "output": "4C"}


@pytest.mark.parametrize(("terminal", "status"), [
    ({"type": "response.failed",
      "response": {**RESPONSE, "status": "failed", "error": {"code": "server_error", "message": "boom"}}},
     "failed"),
    ({"type": "response.incomplete", "response": {**RESPONSE, "status": "incomplete",
                                                 "incomplete_details": {"reason": "max_output_tokens"}}},
     "incomplete"),
    ({"type": "error", "code": "bad", "message": "protocol problem"}, "error"),
])
def test_failed_incomplete_and_error_are_distinct_outcomes(terminal: dict, status: str) -> None:
    acc = accumulate(sse(*TEXT_EVENTS[:5], terminal))
    assert acc.status == status and not acc.complete
    assert acc.text == "Hi"
    assert (acc.error is None) == (status == "incomplete")


def test_unknown_event_types_are_kept_as_unknown_events() -> None:
    acc = accumulate(sse(TEXT_EVENTS[0], {"type": "response.future_thing", "x": 1}, *TEXT_EVENTS[1:]))
    unknown = [e for e in acc.events if isinstance(e, UnknownEvent)]
    assert [(u.type, u.raw["x"]) for u in unknown] == [("response.future_thing", 1)]
    assert acc.complete


def test_unknown_item_types_are_kept() -> None:
    body = {**FINAL, "output": [{"type": "hologram", "id": "h1", "frames": 3}, *FINAL["output"]]}
    result = responses.parse_response(body)
    assert isinstance(result.output[0], responses.UnknownItem)
    assert result.output[0].raw["frames"] == 3 and result.text == "Hi there"
    assert "hologram" in result._repr_html_()


def test_repeated_sequence_numbers_do_not_double_text() -> None:
    events = decode(sse(*TEXT_EVENTS))
    acc = responses.ResponsesAccumulator()
    for event in events[:5] + events[4:5] + events[5:6]:
        acc.add(event)
    assert acc.text == "Hi there" and acc.duplicates == 1


def test_event_without_json_type_takes_the_sse_event_name() -> None:
    acc = accumulate(b'event: response.created\ndata: {"response": {"id": "r1"}}\n\n')
    assert acc.events[0].type == "response.created" and acc.result().id == "r1"
