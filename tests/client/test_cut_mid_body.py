"""A stream cut after data arrived stays an interrupted stream, with what arrived kept (issue 31 point 8).

A raw socket server on loopback answers every request, the connect check's `GET /models` included, with a
200 status line, chunked headers and one SSE chunk, then closes the connection mid-body. Before, connect()'s
check read the cut `/models` body and raised `ConnectionFailed: no answer from the gateway ... peer closed
connection`, and the text that arrived was lost. Per family (chat, responses, messages), sync and async: the
stream raises `StreamInterrupted` whose `.partial` holds the text, says `interrupted`, and the ledger agrees.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

import gwlab
from gwlab import errors

KEY = "gwk-cut-mid-body-test-key"
TEXT = "The capital"

_RESPONSE_ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
_ADDR = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
EVENTS: dict[str, list[dict]] = {
    "/chat/completions": [{"id": "c1", "object": "chat.completion.chunk", "model": "m",
                           "choices": [{"index": 0, "delta": {"content": TEXT}, "finish_reason": None}]}],
    "/responses": [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
                   {"type": "response.output_item.added", "output_index": 0, "item": _RESPONSE_ITEM},
                   {"type": "response.output_text.delta", **_ADDR, "delta": TEXT}],
    "/messages": [{"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": [],
                                                        "usage": {"input_tokens": 4, "output_tokens": 1}}},
                  {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}}],
}


def _sse(path: str) -> bytes:
    events = EVENTS.get(path.removeprefix("/v1"), [])
    named = path.endswith(("/responses", "/messages"))
    return b"".join((f"event: {e['type']}\n" if named else "").encode() + f"data: {json.dumps(e)}\n\n".encode()
                    for e in events)


def _answer(conn: socket.socket) -> None:
    """Read one request, send headers and one chunk of the family's first events, then close mid-body."""
    with conn:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                       if k.strip().lower() == "content-length"), 0)
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                return
            body += more
        chunk = _sse(lines[0].split()[1]) or b"{"
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                     b"x-request-id: req_cut\r\n\r\n" + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        # and close: no terminating 0-chunk, the body is cut


@contextmanager
def cutting_server() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=10)
        with suppress(OSError):
            listener.close()


@pytest.fixture
def base_url() -> Iterator[str]:
    with cutting_server() as url:
        yield url


def _open(family: str, face):  # type: ignore[no-untyped-def]
    if family == "chat":
        return face.chat.stream("hi", model="m")
    if family == "responses":
        return face.responses.stream("hi", model="m")
    return face.messages.stream("hi", model="m", max_tokens=5)


def _check(stream, failure: errors.StreamInterrupted, gw) -> None:  # type: ignore[no-untyped-def]
    assert failure.partial.text == TEXT and stream.text == TEXT
    assert stream.ending == "interrupted" and not stream.complete
    row = gw.usage.iloc[-1]
    assert row["ending"] == "interrupted" and not bool(row["complete"])


FAMILIES = ["chat", "responses", "messages"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_stream_cut_mid_body_raises_interrupted_with_the_text_kept(base_url: str, family: str) -> None:
    gw = gwlab.connect(base_url=base_url, api_key=KEY)  # the connect check is answered by a cut body too
    try:
        stream = _open(family, gw)
        with pytest.raises(errors.StreamInterrupted) as info:
            for _ in stream:
                pass
        _check(stream, info.value, gw)
    finally:
        gw.close()


@pytest.mark.parametrize("family", FAMILIES)
async def test_an_async_stream_cut_mid_body_raises_interrupted_with_the_text_kept(base_url: str, family: str) -> None:
    gw = gwlab.AsyncGateway(base_url, KEY)
    try:
        stream = await _open(family, gw)
        with pytest.raises(errors.StreamInterrupted) as info:
            async for _ in stream:
                pass
        _check(stream, info.value, gw)
    finally:
        await gw.aclose()


def test_connect_reaches_a_server_whose_bodies_are_cut(base_url: str) -> None:
    gwlab.connect(base_url=base_url, api_key=KEY).close()  # before: ConnectionFailed "no answer from the gateway"
