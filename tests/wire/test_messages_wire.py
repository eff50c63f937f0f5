"""Messages wire: request body, typed blocks, the named-event stream (protocols.md §4)."""

from __future__ import annotations

import json

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import messages
from gwlab.wire.sse import UnknownEvent, decode


def sse(*events: dict) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


START = {"type": "message_start", "message": {"id": "msg_gw01", "type": "message", "role": "assistant",
                                              "model": "gw-claude", "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 25, "output_tokens": 1}}}


def text_delta(index: int, text: str) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}


def json_delta(index: int, partial: str) -> dict:
    return {"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial}}


# protocols.md §4.4, text + tool use [verified]
EVENTS = [
    START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    text_delta(0, "Checking now."),
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": "toolu_gw01", "name": "get_weather", "input": {}}},
    json_delta(1, ""),
    json_delta(1, '{"city": "Os'),
    json_delta(1, 'lo"}'),
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 18}},
    {"type": "message_stop"},
]


def accumulate(payload: bytes) -> messages.MessagesAccumulator:
    acc = messages.MessagesAccumulator()
    for event in decode(payload):
        acc.add(event)
    return acc


def test_build_request_requires_max_tokens_and_omits_unset_parameters() -> None:
    body = messages.build_request("hi", model="m", max_tokens=10, system=None, temperature=0.2)
    assert body == {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                    "temperature": 0.2}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"messages": "hi", "model": "m", "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "system", "content": "x"}], "model": "m", "max_tokens": 5}, "messages[0].role"),
    ({"messages": "hi", "model": "m", "max_tokens": 5, "tools": [{"name": "f"}]}, "tools[0].input_schema"),
])
def test_build_request_names_the_invalid_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        messages.build_request(**kwargs)
    assert info.value.field == field


def test_text_and_tool_use_stream_is_assembled() -> None:
    acc = accumulate(sse(*EVENTS))
    assert acc.complete and acc.status == "completed"
    assert acc.text == "Checking now."
    [tool] = acc.tool_calls
    assert (tool.id, tool.name, tool.input) == ("toolu_gw01", "get_weather", {"city": "Oslo"})
    assert (acc.usage.input_tokens, acc.usage.output_tokens) == (25, 18)
    assert acc.result().stop_reason == "tool_use"
    assert tool.result("4C") == {"type": "tool_result", "tool_use_id": "toolu_gw01", "content": "4C"}


def test_complete_only_at_message_stop() -> None:
    acc = accumulate(sse(*EVENTS[:-1]))
    assert not acc.complete and acc.text == "Checking now."


def test_open_block_is_assembled_from_pieces_when_cut() -> None:
    acc = accumulate(sse(*EVENTS[:4]))
    assert acc.text == "Checking now." and not acc.complete


def test_invalid_tool_json_is_kept_as_text_not_guessed() -> None:
    acc = accumulate(sse(*EVENTS[:6], json_delta(1, '{"city": '), {"type": "content_block_stop", "index": 1}))
    [tool] = acc.tool_calls
    assert tool.input is None and tool.input_json == '{"city": '


def test_error_event_sets_error() -> None:
    acc = accumulate(sse(START, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}))
    assert acc.status == "error" and acc.error["type"] == "overloaded_error"


def test_unknown_events_and_blocks_are_kept() -> None:
    acc = accumulate(sse(START, {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "hologram", "frames": 2}},
                         {"type": "future_event", "x": 1}, {"type": "message_stop"}))
    assert isinstance(acc.events[2], UnknownEvent) and acc.events[2].raw["x"] == 1
    block = acc.result().content[0]
    assert isinstance(block, messages.UnknownBlock) and block.raw["frames"] == 2


def test_parse_response_keeps_unknown_fields() -> None:
    body = {"id": "msg_gw01", "type": "message", "role": "assistant", "model": "gw-claude", "extra": 1,
            "content": [{"type": "text", "text": "Checking now."},
                        {"type": "tool_use", "id": "toolu_gw01", "name": "get_weather",
                         "input": {"city": "Oslo"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 25, "output_tokens": 18}}
    result = messages.parse_response(body, "req_9")
    assert result.raw["extra"] == 1 and result.tool_calls[0].input == {"city": "Oslo"}
    assert result.usage.total_tokens == 43 and result.request_id == "req_9"
    assert "get_weather" in result._repr_html_()
