"""Chat wire: the request body, the typed result and the stream accumulator (protocols.md §2)."""

from __future__ import annotations

import json

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import chat
from gwlab.wire.sse import UnknownEvent, decode


def sse(*payloads: object) -> bytes:
    return b"".join(b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n"
                    for p in payloads)


def chunk(delta: dict | None = None, finish: str | None = None, *, usage: dict | None = None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-gw2", "object": "chat.completion.chunk", "created": 1767225600,
            "model": "gw-echo-1", "choices": choices, "usage": usage}


def call(index: int, arguments: str, **first: str) -> dict:
    head = {"id": first["id"], "type": "function"} if first else {}
    function = {"name": first["name"], "arguments": arguments} if first else {"arguments": arguments}
    return {"tool_calls": [{"index": index, **head, "function": function}]}


# protocols.md §2.4 [verified], plus a second parallel call interleaved
TOOL_STREAM = sse(
    chunk({"role": "assistant", "content": None, **call(0, "", id="call_w1", name="get_weather")}),
    chunk(call(1, "{}", id="call_w2", name="get_time")),
    chunk(call(0, '{"city":')),
    chunk(call(0, '"Oslo"}')),
    chunk({}, "tool_calls"),
    chunk(usage={"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51}),
    b"[DONE]",
)


def text_stream(pieces: list[str], *, n: int = 1, done: bool = True) -> bytes:
    out = []
    for piece in pieces:
        for index in range(n):
            out.append(f'data: {{"id":"c1","model":"m","choices":[{{"index":{index},"delta":{{"content":'
                       f'"{piece}{index}"}},"finish_reason":null}}]}}\n\n')
    out.append('data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def accumulate(payload: bytes) -> chat.ChatAccumulator:
    acc = chat.ChatAccumulator()
    for event in decode(payload):
        acc.add(event)
    return acc


def test_build_request_omits_unset_optional_parameters() -> None:
    body = chat.build_request("hi", model="m", temperature=None, max_completion_tokens=5)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5}


def test_build_request_for_a_stream_asks_for_the_usage_chunk() -> None:
    body = chat.build_request("hi", model="m", stream=True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"messages": "hi", "model": ""}, "model"),
    ({"messages": [], "model": "m"}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}], "model": "m"}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "4"}], "model": "m"},
     "messages[1].tool_call_id"),
    ({"messages": "hi", "model": "m", "tools": [{"type": "function", "name": "f"}]},
     "tools[0].function.name"),
])
def test_build_request_names_the_invalid_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        chat.build_request(**kwargs)
    assert info.value.field == field


def test_parse_response_keeps_unknown_fields_in_raw() -> None:
    body = {"id": "chatcmpl-gw1", "model": "gw-echo-1", "novel": {"x": 1},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_w1", "type": "function", "function": {"name": "get_weather",
                                                                   "arguments": "{\"city\":\"Oslo\"}"}}]},
                         "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51}}
    result = chat.parse_response(body, "req_1")
    assert result.raw["novel"] == {"x": 1}
    assert result.tool_calls[0].parsed_arguments() == {"city": "Oslo"}
    assert (result.usage.input_tokens, result.usage.output_tokens) == (42, 9)
    assert result.request_id == "req_1" and result.text == ""
    assert "get_weather" in result._repr_html_()


def test_absent_or_null_usage_is_none() -> None:
    assert chat.parse_response({"choices": [], "usage": None}).usage is None


def test_tool_call_fragments_are_assembled_by_index() -> None:
    acc = accumulate(TOOL_STREAM)
    assert acc.complete
    assert [(c.id, c.name, c.arguments) for c in acc.tool_calls] == [
        ("call_w1", "get_weather", '{"city":"Oslo"}'), ("call_w2", "get_time", "{}")]
    assert acc.usage.total_tokens == 51
    result = acc.result()
    assert result.finish_reason == "tool_calls" and result.choices[0].message.content is None


def test_usage_chunk_with_empty_choices_is_counted_not_a_choice() -> None:
    acc = accumulate(TOOL_STREAM)
    assert len(acc.result().choices) == 1
    assert acc.events[-1].choices == [] and acc.events[-1].usage.prompt_tokens == 42


def test_content_is_kept_per_choice() -> None:
    acc = accumulate(text_stream(["a", "b"], n=2))
    assert acc.text == "a0b0"
    assert [c.message.content for c in acc.result().choices] == ["a0b0", "a1b1"]


def test_stream_without_done_is_not_complete() -> None:
    acc = accumulate(text_stream(["a"], done=False))
    assert not acc.complete and acc.text == "a0" and acc.status == "in_progress"


def test_chunk_text_is_the_delta_of_choice_zero() -> None:
    acc = accumulate(text_stream(["x"]))
    assert [e.text for e in acc.events] == ["x0", ""]


def test_error_payload_sets_error() -> None:
    acc = accumulate(b'data: {"error":{"message":"boom","type":"server_error","code":null}}\n\n')
    assert acc.error["message"] == "boom" and acc.status == "error"


def test_malformed_payload_is_kept_as_unknown_event() -> None:
    acc = accumulate(b"data: {not json\n\n" + text_stream(["a"]))
    assert isinstance(acc.events[0], UnknownEvent) and acc.events[0].raw == {"data": "{not json"}
    assert acc.complete and acc.text == "a0"
