"""Streams under faults: cuts, malformed SSE, error events, unknown events (via httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest

from gwlab import errors
from gwlab.wire.responses import ResponseEvent, UnknownItem
from gwlab.wire.sse import UnknownEvent
from tests.support.fakes import chat_body, sse_bytes, sse_response


def chunk(text: str) -> dict:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    return {"id": "c1", "model": "m", "choices": [choice]}


FINISH = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
USAGE = {"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                                             "total_tokens": 7}}
CUT = httpx.RemoteProtocolError("peer closed connection without sending complete message body")


async def test_complete_chat_stream_yields_chunks_and_the_result(make_gateway):
    body = sse_bytes(chunk("Hel"), chunk("lo"), FINISH, USAGE, "[DONE]")
    gw = make_gateway(lambda r: sse_response([body[:40], body[40:]], **{"x-request-id": "req_s"}))
    stream = await gw.chat.stream("hi", model="m")
    texts = [event.text async for event in stream]
    assert "".join(texts) == "Hello" and stream.complete and stream.status == "completed"
    assert stream.result.text == "Hello" and stream.result.request_id == "req_s"
    [row] = gw.ledger.entries()
    assert (row.streamed, row.complete, row.input_tokens, row.output_tokens) == (True, True, 5, 2)


async def test_stream_cut_mid_way_keeps_the_partial_text_and_raises_interrupted_at_the_end(make_gateway):
    gw = make_gateway(lambda r: sse_response([sse_bytes(chunk("Hel")), sse_bytes(chunk("lo"))[:20]], CUT))
    stream = await gw.chat.stream("hi", model="m")
    seen = []
    with pytest.raises(errors.StreamInterrupted) as info:
        async for event in stream:
            seen.append(event.text)
    assert seen == ["Hel"]
    assert not stream.complete and stream.status == "interrupted" and stream.text == "Hel"
    assert info.value.partial.text == "Hel" and isinstance(info.value.__cause__, httpx.RemoteProtocolError)
    assert errors.IncompleteStream is errors.StreamInterrupted
    [row] = gw.ledger.entries()
    assert (row.complete, row.error) == (False, "StreamInterrupted")


async def test_stream_ending_without_done_is_interrupted(make_gateway):
    gw = make_gateway(lambda r: sse_response([sse_bytes(chunk("a"), FINISH)]))
    stream = await gw.chat.stream("hi", model="m")
    with pytest.raises(errors.IncompleteStream):
        await stream.collect()
    assert stream.text == "a" and not stream.complete


async def test_opting_out_gives_the_partial_result_without_raising(make_gateway):
    gw = make_gateway(lambda r: sse_response([sse_bytes(chunk("a"))], CUT))
    stream = await gw.chat.stream("hi", model="m", allow_partial=True)
    result = await stream.collect()
    assert result.text == "a" and stream.complete is False and stream.status == "interrupted"


async def test_malformed_sse_is_kept_as_unknown_events_and_does_not_stop_the_stream(make_gateway):
    body = b"data: {not json\n\n: comment\nnonsense line\n\n" + sse_bytes(chunk("ok"), FINISH, "[DONE]")
    gw = make_gateway(lambda r: sse_response([body]))
    stream = await gw.chat.stream("hi", model="m")
    events = [event async for event in stream]
    assert isinstance(events[0], UnknownEvent) and events[0].raw == {"data": "{not json"}
    assert stream.complete and stream.text == "ok"


async def test_error_payload_mid_chat_stream_raises_stream_error_after_earlier_chunks(make_gateway):
    body = sse_bytes(chunk("par"), {"error": {"message": "model crashed", "type": "server_error"}})
    gw = make_gateway(lambda r: sse_response([body]))
    stream = await gw.chat.stream("hi", model="m")
    seen = []
    with pytest.raises(errors.StreamError, match="model crashed") as info:
        async for event in stream:
            seen.append(event)
    assert seen[0].text == "par" and info.value.partial.text == "par"
    assert gw.ledger.entries()[0].error == "StreamError"


def responses_events(*extra: dict) -> list[dict]:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    addr = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_text.delta", **addr, "delta": "Hi"},
        *extra,
    ]


def numbered(events: list[dict]) -> list[dict]:
    return [{**event, "sequence_number": i} for i, event in enumerate(events)]


async def test_unknown_event_and_item_types_are_kept(make_gateway):
    hologram = {"type": "hologram", "id": "h_1", "frames": 3}
    final = {"id": "resp_1", "status": "completed", "output": [
        hologram, {"id": "msg_1", "type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Hi"}]}], "usage": {"input_tokens": 2, "output_tokens": 1}}
    added = {"type": "response.output_item.added", "output_index": 1, "item": hologram}
    events = numbered(responses_events({"type": "response.teleport.started", "where": "mars"}, added,
                                       {"type": "response.completed", "response": final}))
    gw = make_gateway(lambda r: sse_response([sse_bytes(*events, named=True)]))
    stream = await gw.responses.stream("hi", model="m")
    seen = [event async for event in stream]
    unknown = [e for e in seen if isinstance(e, UnknownEvent)]
    assert [(u.type, u.raw["where"]) for u in unknown] == [("response.teleport.started", "mars")]
    assert all(isinstance(e, ResponseEvent | UnknownEvent) for e in seen)
    assert stream.complete and isinstance(stream.result.output[0], UnknownItem)
    assert stream.result.output[0].raw["frames"] == 3 and stream.text == "Hi"


async def test_response_failed_is_a_stream_error_and_incomplete_is_a_status(make_gateway):
    failed = {"type": "response.failed", "response": {"id": "resp_1", "status": "failed",
                                                      "error": {"code": "server_error", "message": "boom"}}}
    gw = make_gateway(lambda r: sse_response([sse_bytes(*numbered(responses_events(failed)), named=True)]))
    stream = await gw.responses.stream("hi", model="m")
    with pytest.raises(errors.StreamError) as info:
        await stream.collect()
    assert info.value.code == "server_error" and stream.status == "failed" and not stream.complete
    details = {"reason": "max_output_tokens"}
    incomplete = {"type": "response.incomplete",
                  "response": {"id": "resp_1", "status": "incomplete", "incomplete_details": details}}
    body = sse_bytes(*numbered(responses_events(incomplete)), named=True)
    gw = make_gateway(lambda r: sse_response([body]))
    stream = await gw.responses.stream("hi", model="m")
    result = await stream.collect()
    assert stream.status == "incomplete" and not stream.complete and result.text == "Hi"
    assert result.incomplete_details == {"reason": "max_output_tokens"}


async def test_messages_error_event_raises_after_the_text_before_it(make_gateway):
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 4, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    gw = make_gateway(lambda r: sse_response([sse_bytes(*events, named=True)]))
    stream = await gw.messages.stream("hi", model="m", max_tokens=5)
    with pytest.raises(errors.StreamError, match="Overloaded"):
        async for _ in stream:
            pass
    assert stream.text == "Par" and stream.status == "error"


async def test_a_json_answer_to_a_stream_request_is_a_complete_stream(make_gateway):
    gw = make_gateway(lambda r: httpx.Response(200, json=chat_body("whole")))
    stream = await gw.chat.stream("hi", model="m")
    assert [e async for e in stream] == [] and stream.complete and stream.text == "whole"


async def test_stream_status_error_is_raised_before_any_event(make_gateway, fast_retries):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return httpx.Response(503)
        return sse_response([sse_bytes(chunk("x"), FINISH, "[DONE]")])

    gw = make_gateway(handler)
    stream = await gw.chat.stream("hi", model="m")
    assert (await stream.collect()).text == "x" and len(calls) == 2
    assert calls[0].headers["accept"] == "text/event-stream"


async def test_closing_a_stream_early_records_it_incomplete(make_gateway):
    rest = sse_bytes(chunk("b"), FINISH, "[DONE]")
    gw = make_gateway(lambda r: sse_response([sse_bytes(chunk("a")), rest]))
    async with await gw.chat.stream("hi", model="m") as stream:
        async for _ in stream:
            break
    [row] = gw.ledger.entries()
    assert row.complete is False and row.error is None


def test_sync_stream_twin_iterates_and_raises_the_same(make_sync_gateway):
    gw = make_sync_gateway(lambda r: sse_response([sse_bytes(chunk("Hel"))], CUT))
    stream = gw.chat.stream("hi", model="m")
    seen = []
    with pytest.raises(errors.StreamInterrupted):
        for event in stream:
            seen.append(event.text)
    assert seen == ["Hel"] and stream.text == "Hel" and not stream.complete
    gw2 = make_sync_gateway(lambda r: sse_response([sse_bytes(chunk("ok"), FINISH, "[DONE]")]))
    with gw2.chat.stream("hi", model="m") as stream:
        assert stream.collect().text == "ok" and stream.complete
