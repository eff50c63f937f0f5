"""A stream whose end marker comes without its reason is cut, not complete (issue 13 item 2).

llama-cpp-python's server ends a running chat stream with a bare `data: [DONE]` when a second
request arrives: no choice ever got a finish_reason. Here a tiny real HTTP server on loopback
(standard library, chunked SSE) sends exactly such streams, and gwlab is driven through its public
API only: the stream raises StreamInterrupted as for a network cut, says `interrupted`, and the
ledger row agrees. A capped answer, by contrast, ends properly and is reported `capped`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

import gwlab
from gwlab import errors
from tests.support.http_stub import serving

KEY = "gwk-raw-sse-test-key"


def _chunk(text: str | None, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    delta = {"content": text} if text is not None else {}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


# what the server streams, by the prompt it is sent
CHAT_STREAMS: dict[str, list[Any]] = {
    # llama-cpp-python's interrupted stream: content, then [DONE], never a finish_reason
    "cut": [_chunk("The capital"), _chunk(" of France"), "[DONE]"],
    # [DONE] before any choice at all
    "empty": ["[DONE]"],
    # two choices, only the first finished
    "half": [_chunk("a", index=0), _chunk("b", index=1), _chunk(None, "stop", index=0), "[DONE]"],
    # the caller's token cap: a proper end, with its own reason
    "capped": [_chunk("The capital of"), _chunk(None, "length"), "[DONE]"],
    "whole": [_chunk("Paris."), _chunk(None, "stop"), "[DONE]"],
}

_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 0}}
MESSAGES_STREAMS: dict[str, list[dict[str, Any]]] = {
    # message_stop with no stop_reason ever sent (no message_delta)
    "cut": [{"type": "message_start", "message": _MESSAGE},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
            {"type": "content_block_stop", "index": 0}, {"type": "message_stop"}],
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path.endswith("/chat/completions"):
            prompt = body["messages"][-1]["content"]
            events = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in CHAT_STREAMS[prompt]]
        else:
            prompt = body["messages"][-1]["content"]
            events = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in MESSAGES_STREAMS[prompt]]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", f"req_{prompt}")
        self.end_headers()
        for event in events:  # one chunk per event, as a server flushing each one
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def raw_server() -> Iterator[str]:
    with serving(_Handler) as base:
        yield base


@pytest.fixture(params=["fast", "httpx"])  # both HTTP transports (gwlab/client/transport/choice.py)
def gw(raw_server: str, request: pytest.FixtureRequest) -> Iterator[gwlab.Gateway]:
    with gwlab.Gateway(raw_server, KEY, http_transport=request.param) as client:
        yield client


@pytest.mark.parametrize("prompt", ["cut", "empty", "half"])
def test_a_chat_stream_ended_by_done_before_every_finish_reason_raises_interrupted(gw, prompt):
    stream = gw.chat.stream(prompt, model="m")
    with pytest.raises(errors.StreamInterrupted, match="end reason") as info:
        for _ in stream:
            pass
    assert (stream.status, stream.ending, stream.complete) == ("interrupted", "interrupted", False)
    assert info.value.partial.text == stream.text
    [row] = gw.ledger.entries()
    assert (row.ending, row.complete, row.error, row.streamed) == ("interrupted", False, "StreamInterrupted", True)


def test_the_cut_chat_stream_keeps_its_text_when_the_caller_allows_partial(gw):
    stream = gw.chat.stream("cut", model="m", allow_partial=True)
    result = stream.collect()
    assert result.text == "The capital of France" and result.ending == "interrupted"
    assert (stream.status, stream.ending, stream.complete) == ("interrupted", "interrupted", False)
    row = gw.usage.iloc[-1]
    assert (row["ending"], row["complete"], row["request_id"]) == ("interrupted", False, "req_cut")


def test_a_capped_chat_stream_ends_without_error_and_says_capped(gw):
    stream = gw.chat.stream("capped", model="m")
    assert stream.collect().text == "The capital of"
    assert (stream.status, stream.ending, stream.complete) == ("completed", "capped", False)
    [row] = gw.ledger.entries()
    assert (row.ending, row.complete, row.error) == ("capped", False, None)


def test_a_chat_stream_with_every_finish_reason_is_complete(gw):
    stream = gw.chat.stream("whole", model="m")
    assert stream.collect().text == "Paris." and (stream.ending, stream.complete) == ("complete", True)
    [row] = gw.ledger.entries()
    assert (row.ending, row.complete) == ("complete", True)


def test_a_messages_stream_stopped_without_a_stop_reason_raises_interrupted(gw):
    stream = gw.messages.stream("cut", model="m", max_tokens=8)
    with pytest.raises(errors.StreamInterrupted):
        stream.collect()
    assert (stream.status, stream.ending, stream.text) == ("interrupted", "interrupted", "Par")
    [row] = gw.ledger.entries()
    assert (row.ending, row.complete, row.family) == ("interrupted", False, "messages")
