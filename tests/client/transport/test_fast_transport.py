"""Both HTTP transports over real sockets: keep-alive, framing, incremental bodies, cuts, retries.

Every test runs over the hand-written fast path and over httpx's own transport (the one every
non-loopback gateway gets), so errors, retries, deadlines, request ids, the ledger and the
interrupted-stream rule cannot differ between them.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import warnings
from collections.abc import Iterator

import httpx
import pytest

import gwlab
from gwlab import errors
from gwlab.client.transport.http11 import FastTransport
from tests.support.fakes import CANARY_KEY

TRANSPORTS = ["fast", "httpx"]  # the names gwlab chooses between (gwlab/client/transport/choice.py)
RAW = {"fast": FastTransport, "httpx": httpx.AsyncHTTPTransport}

CHUNK = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
REST = (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
JSON = json.dumps({"data": [{"id": "m1"}]}).encode()


class Server:
    """A tiny HTTP/1.1 server on its own thread whose misbehaviour is chosen by the path."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[str] = []
        self.cookies: list[bytes | None] = []  # each request's Cookie header
        self.flaked = False
        self.writers: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.release = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.started.wait(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.started.set()
        self.loop.run_forever()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    async def _shutdown(self) -> None:
        # close every server-side socket before the loop stops, so none is left for the GC to warn about
        self.server.close()
        for writer in list(self.writers):
            writer.close()
        await asyncio.sleep(0.01)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                path = head.split(b" ")[1].decode()
                self.requests.append(path)
                self.cookies.append(next((line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                                          if line.lower().startswith(b"cookie:")), None))
                if not await self._answer(path, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.writers.discard(writer)

    async def _answer(self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Write the answer; False closes the connection."""
        json_head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(JSON)
        sse_head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        if "/flaky" in path and not self.flaked:  # once: a retryable status, then the real answer
            self.flaked = True
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nx-request-id: req_503\r\n\r\n")
        elif "/hang" in path:
            await reader.read()  # no answer: wait until the client gives up and closes
            return False
        elif path.endswith("/videos"):
            return False  # read the request, drop the connection: was it acted on? the client cannot know
        elif path.endswith("/models"):
            sticky = b"set-cookie: route=b7; Path=/\r\n" if "/cookie" in path and len(self.requests) == 1 else b""
            writer.write(json_head + sticky + b"x-request-id: req_fast\r\n\r\n" + JSON)
        elif path.endswith("/close-after"):
            writer.write(json_head + b"\r\n" + JSON)
            await writer.drain()
            return False  # the keep-alive connection the client holds is now stale
        elif path.endswith("/eof"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
            writer.write(JSON)
            await writer.drain()
            return False
        elif path.endswith("/short"):
            writer.write(json_head.replace(b"%d" % len(JSON), b"999") + b"\r\n" + JSON[:5])
            await writer.drain()
            return False
        elif path.endswith("/chat/completions"):
            writer.write(sse_head + b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            await writer.drain()
            if "cut" in path:
                return False  # mid-body: no terminating chunk
            await self.release.wait()  # the client must see the first event before the rest exists
            self.release.clear()
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(REST), REST))
        await writer.drain()
        return True

    def let_stream_finish(self) -> None:
        self.loop.call_soon_threadsafe(self.release.set)


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


def base(server: Server, prefix: str = "") -> str:
    return f"http://127.0.0.1:{server.port}{prefix}/v1"


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_keep_alive_reuses_one_connection(server: Server, transport: str):
    async with httpx.AsyncClient(transport=RAW[transport]()) as client:
        for _ in range(3):
            response = await client.get(base(server) + "/models")
            assert response.json() == {"data": [{"id": "m1"}]}
    assert server.connections == 1


async def test_a_stale_keep_alive_connection_is_replaced_transparently(server: Server, transport: str):
    async with httpx.AsyncClient(transport=RAW[transport]()) as client:
        assert (await client.get(base(server) + "/close-after")).status_code == 200
        await asyncio.sleep(0.05)
        assert (await client.get(base(server) + "/models")).json()["data"][0]["id"] == "m1"
    assert server.connections == 2


async def test_body_read_to_eof_and_a_short_body_is_an_error(server: Server, transport: str):
    async with httpx.AsyncClient(transport=RAW[transport]()) as client:
        assert (await client.get(base(server) + "/eof")).json() == {"data": [{"id": "m1"}]}
        with pytest.raises(httpx.RemoteProtocolError, match=r"5 of 999 bytes|received 5 bytes, expected 999"):
            await client.get(base(server) + "/short")
    async with gwlab.AsyncGateway(base(server), CANARY_KEY, http_transport=transport, max_retries=0) as gw:
        with pytest.raises(errors.ConnectionFailed, match="RemoteProtocolError"):
            await gw.transport.request("GET", "/short", family="models")
        assert gw.ledger.entries()[0].complete is False


async def test_sse_events_arrive_before_the_body_ends(server: Server, transport: str):
    async with gwlab.AsyncGateway(base(server), CANARY_KEY, http_transport=transport) as gw:
        assert gw.http_transport.name == transport
        stream = await gw.chat.stream("hi", model="m")
        events = aiter(stream)
        first = await anext(events)
        assert first.text == "Hel"  # the server holds the rest back until told
        server.let_stream_finish()
        assert [event.text async for event in events] == ["lo"]
        assert stream.complete and stream.text == "Hello"


async def test_a_socket_cut_mid_stream_is_interrupted_with_the_partial_text(server: Server, transport: str):
    async with gwlab.AsyncGateway(base(server, "/cut"), CANARY_KEY, http_transport=transport) as gw:
        stream = await gw.chat.stream("hi", model="m")
        with pytest.raises(errors.StreamInterrupted) as info:
            await stream.collect()
        assert info.value.partial.text == "Hel" and not stream.complete
        assert gw.ledger.entries()[0].complete is False


async def test_connection_refused_is_connection_failed_after_retries(fast_retries, transport: str):
    async with gwlab.AsyncGateway("http://127.0.0.1:9", CANARY_KEY, max_retries=1, http_transport=transport) as gw:
        with pytest.raises(errors.ConnectionFailed, match="could not connect"):
            await gw.models()
        assert gw.ledger.entries()[0].retries == 1


async def test_a_retryable_status_is_retried_and_the_answer_keeps_its_request_id(server: Server, transport: str,
                                                                                 fast_retries):
    async with gwlab.AsyncGateway(base(server, "/flaky"), CANARY_KEY, http_transport=transport) as gw:
        listing = await gw.models.list()
        assert listing.request_id == "req_fast" and "m1" in listing
        [row] = gw.ledger.entries()
        assert (row.status, row.retries, row.request_id, row.complete) == (200, 1, "req_fast", True)
    assert server.requests == ["/flaky/v1/models"] * 2


async def test_a_post_dropped_after_sending_is_not_resent_unless_idempotent(server: Server, transport: str,
                                                                            fast_retries):
    async with gwlab.AsyncGateway(base(server), CANARY_KEY, http_transport=transport, max_retries=2) as gw:
        with pytest.raises(errors.ConnectionFailed):  # a video task may exist now: its family looks it up
            await gw.transport.request("POST", "/videos", family="tasks", json={"prompt": "a cat"})
        assert server.requests == ["/v1/videos"]
        with pytest.raises(errors.ConnectionFailed):  # GET is idempotent: resent up to the limit
            await gw.transport.request("GET", "/videos", family="tasks")
        assert server.requests == ["/v1/videos"] + ["/v1/videos"] * 3


async def test_a_cookie_the_gateway_sets_is_sent_back_on_later_calls(server: Server, transport: str):
    """A load balancer's sticky-session cookie: the fast path skips httpx's `send` but keeps its cookie jar."""
    async with gwlab.AsyncGateway(base(server, "/cookie"), CANARY_KEY, http_transport=transport) as gw:
        for _ in range(3):
            assert "m1" in await gw.models.list()
    assert server.cookies == [None, b"route=b7", b"route=b7"]


async def test_the_deadline_bounds_a_call_the_server_never_answers(server: Server, transport: str):
    async with gwlab.AsyncGateway(base(server, "/hang"), CANARY_KEY, http_transport=transport, deadline=0.2) as gw:
        with pytest.raises(errors.Timeout, match="deadline"):
            await gw.models()
        assert gw.ledger.entries()[0].error == "Timeout"


async def test_the_read_timeout_ends_a_silent_answer_as_a_timeout(server: Server, transport: str):
    async with gwlab.AsyncGateway(base(server, "/hang"), CANARY_KEY, http_transport=transport, timeout=0.2,
                                  max_retries=0) as gw:
        with pytest.raises(errors.Timeout, match="waiting for the answer") as info:
            await gw.models()
        assert isinstance(info.value.__cause__, httpx.ReadTimeout)


def test_sync_clients_over_real_sockets_close_quietly(server: Server, capfd, transport: str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            gw = gwlab.Gateway(base(server), CANARY_KEY, http_transport=transport)
            assert gw.models() == ["m1"]
        del gw
        gc.collect()
        gw = gwlab.Gateway(base(server), CANARY_KEY, http_transport=transport)
        gw.models()
        gw.close()
        gw.close()
        gc.collect()
    captured = capfd.readouterr()
    text = captured.err + "".join(str(w.message) for w in caught)
    assert "Event loop is closed" not in text and "unclosed" not in text.lower()
