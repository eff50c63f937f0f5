"""The lean HTTP/1.1 transport over real sockets: keep-alive, framing, incremental bodies, cuts."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import warnings
from collections.abc import Iterator

import httpx
import pytest
from clientkit import CANARY_KEY

import gwlab
from gwlab import errors
from gwlab.client._http11 import FastTransport

CHUNK = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
REST = (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
JSON = json.dumps({"data": [{"id": "m1"}]}).encode()


class Server:
    """A tiny HTTP/1.1 server on its own thread whose misbehaviour is chosen by the path."""

    def __init__(self) -> None:
        self.connections = 0
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
                if not await self._answer(path, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.writers.discard(writer)

    async def _answer(self, path: str, writer: asyncio.StreamWriter) -> bool:
        """Write the answer; False closes the connection."""
        json_head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(JSON)
        sse_head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        if path.endswith("/models"):
            writer.write(json_head + b"x-request-id: req_fast\r\n\r\n" + JSON)
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


async def test_keep_alive_reuses_one_connection(server: Server):
    async with httpx.AsyncClient(transport=FastTransport()) as client:
        for _ in range(3):
            response = await client.get(base(server) + "/models")
            assert response.json() == {"data": [{"id": "m1"}]}
    assert server.connections == 1


async def test_a_stale_keep_alive_connection_is_replaced_transparently(server: Server):
    async with httpx.AsyncClient(transport=FastTransport()) as client:
        assert (await client.get(base(server) + "/close-after")).status_code == 200
        await asyncio.sleep(0.05)
        assert (await client.get(base(server) + "/models")).json()["data"][0]["id"] == "m1"
    assert server.connections == 2


async def test_body_read_to_eof_and_a_short_body_is_an_error(server: Server):
    async with httpx.AsyncClient(transport=FastTransport()) as client:
        assert (await client.get(base(server) + "/eof")).json() == {"data": [{"id": "m1"}]}
        with pytest.raises(httpx.RemoteProtocolError, match="5 of 999 bytes"):
            await client.get(base(server) + "/short")


async def test_sse_events_arrive_before_the_body_ends(server: Server):
    async with gwlab.AsyncGateway(base(server), CANARY_KEY) as gw:
        stream = await gw.chat.stream("hi", model="m")
        events = aiter(stream)
        first = await anext(events)
        assert first.text == "Hel"  # the server holds the rest back until told
        server.let_stream_finish()
        assert [event.text async for event in events] == ["lo"]
        assert stream.complete and stream.text == "Hello"


async def test_a_socket_cut_mid_stream_is_interrupted_with_the_partial_text(server: Server):
    async with gwlab.AsyncGateway(base(server, "/cut"), CANARY_KEY) as gw:
        stream = await gw.chat.stream("hi", model="m")
        with pytest.raises(errors.StreamInterrupted) as info:
            await stream.collect()
        assert info.value.partial.text == "Hel" and not stream.complete
        assert gw.ledger.entries()[0].complete is False


async def test_connection_refused_is_connection_failed_after_retries(fast_retries):
    async with gwlab.AsyncGateway("http://127.0.0.1:9", CANARY_KEY, max_retries=1) as gw:
        with pytest.raises(errors.ConnectionFailed, match="could not connect"):
            await gw.models()
        assert gw.ledger.entries()[0].retries == 1


def test_sync_clients_over_real_sockets_close_quietly(server: Server, capfd):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            gw = gwlab.Gateway(base(server), CANARY_KEY)
            assert gw.models() == ["m1"]
        del gw
        gc.collect()
        gw = gwlab.Gateway(base(server), CANARY_KEY)
        gw.models()
        gw.close()
        gw.close()
        gc.collect()
    captured = capfd.readouterr()
    text = captured.err + "".join(str(w.message) for w in caught)
    assert "Event loop is closed" not in text and "unclosed" not in text.lower()
