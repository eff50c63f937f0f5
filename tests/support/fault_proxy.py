"""A loopback fault proxy: an HTTP/1.1-aware TCP relay between a client and the embedded gateway.

Why on the wire and not in `httpx.MockTransport`: a mock fakes the gateway, so it cannot show what
the gateway *billed* when an answer was lost, and it bypasses the client's own HTTP transport
(keep-alive, stale-connection handling). Here the real client meets the real gateway, and a script
decides per request what goes wrong in between:

- `Pass()`                       relay untouched
- `Status(429, retry_after=1)`   answer in the gateway's place (a 429 storm, a 5xx burst); the
                                 gateway never sees the request, so nothing is billed
- `Delay(s, where="request")`    a latency spike before forwarding; `where="response"` holds the
                                 gateway's answer back instead (it is already billed)
- `CutResponse(n)`               forward the request, relay the answer's head and `n` bytes of its
                                 body (an SSE stream: its first events), then cut both connections;
                                 `n=None`: cut before the first byte of the head reached the client
- `CutRequest(n)`                relay the head and only `n` bytes of the request body, then cut
- WebSocket upgrades are tunnelled; `CutResponse(n)` cuts a tunnel after `n` bytes from the server.

Every request is recorded as an `Exchange`: the SHA-256 of the body the gateway received, the fault,
the gateway's status and `x-request-id` (which joins it to the gateway's own request log), and
whether the answer reached the client whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["CutRequest", "CutResponse", "Delay", "Exchange", "Fault", "FaultProxy", "Pass", "Status"]

_MAX_HEAD = 64 * 1024


# --- faults ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fault:
    """Base of the faults a script returns."""


@dataclass(frozen=True)
class Pass(Fault):
    pass


@dataclass(frozen=True)
class Status(Fault):
    status: int
    retry_after: float | None = None
    message: str = "injected by the fault proxy"


@dataclass(frozen=True)
class Delay(Fault):
    seconds: float
    where: str = "request"  # "request": before forwarding; "response": after the gateway answered


@dataclass(frozen=True)
class CutResponse(Fault):
    after_bytes: int | None = 0  # body bytes relayed before the cut; None: not even the head


@dataclass(frozen=True)
class CutRequest(Fault):
    after_bytes: int = 0  # request body bytes relayed to the gateway before the cut


Script = Callable[["Exchange"], Fault]
Upstream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass
class Exchange:
    """One request through the proxy, as the gateway saw it and as the client got it."""

    index: int
    method: str
    path: str
    body_sha: str
    body_bytes: int
    websocket: bool = False
    fault: Fault = field(default_factory=Pass)
    forwarded: bool = False  # the whole request reached the gateway
    status: int | None = None  # the gateway's status (None: it never answered)
    request_id: str | None = None  # the gateway's x-request-id
    delivered: bool = False  # the client received the whole answer (a synthetic one included)
    relayed: int = 0  # body bytes relayed to the client

    @property
    def lost_after_answer(self) -> bool:
        """The gateway answered (and billed) but the client never got the whole answer."""
        return self.status is not None and not self.delivered


# --- HTTP/1.1 framing ------------------------------------------------------------------------------
def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head[:-4].decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip().lower(), value.strip()))
    return lines[0], headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k == name), None)


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> tuple[bytes, bytes]:
    """(raw bytes as framed on the wire, decoded body) of a request with Content-Length or chunked."""
    if "chunked" in (_header(headers, "transfer-encoding") or "").lower():
        raw, body = bytearray(), bytearray()
        while True:
            line = await reader.readuntil(b"\r\n")
            raw += line
            size = int(line.split(b";", 1)[0].strip(), 16)
            chunk = await reader.readexactly(size + 2)
            raw += chunk
            body += chunk[:-2]
            if size == 0:
                return bytes(raw), bytes(body)
    length = int(_header(headers, "content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    return body, body


def _synthetic(status: int, retry_after: float | None, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "injected", "param": None,
                                 "code": "injected_fault"}}).encode()
    reason = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
              503: "Service Unavailable", 504: "Gateway Timeout"}.get(status, "Injected")
    lines = [f"HTTP/1.1 {status} {reason}", "content-type: application/json",
             f"content-length: {len(body)}", f"x-request-id: req_proxy_{status}"]
    if retry_after is not None:
        lines.append(f"retry-after: {retry_after:g}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None and not writer.is_closing():
        writer.close()


# --- the proxy -------------------------------------------------------------------------------------
class FaultProxy:
    """`with FaultProxy(gateway.base_url, script) as proxy:` then point a client at `proxy.base_url`.

    Runs on its own event-loop thread, so a synchronous test (or a sync gateway on another loop) can
    use it; `script` may be replaced while it runs (`proxy.script = ...`)."""

    def __init__(self, upstream_base_url: str, script: Script | None = None) -> None:
        parts = urlsplit(upstream_base_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.script: Script = script or (lambda exchange: Pass())
        self.exchanges: list[Exchange] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def records(self, path: str | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if path is None or e.path == path]

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=_MAX_HEAD)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: Upstream | None = None
        try:
            while True:  # one client connection carries many requests (keep-alive)
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, headers = _parse_head(head)
                raw, body = await _read_body(reader, headers)
                method, target = line.split(" ")[:2]
                exchange = Exchange(next(self._counter), method, target.split("?")[0],
                                    hashlib.sha256(body).hexdigest(), len(body),
                                    websocket=(_header(headers, "upgrade") or "").lower() == "websocket")
                exchange.fault = self.script(exchange)
                with self._lock:
                    self.exchanges.append(exchange)
                if upstream is not None and (upstream[1].is_closing() or upstream[0].at_eof()):
                    _close(upstream[1])
                    upstream = None
                if upstream is None and not isinstance(exchange.fault, Status):
                    upstream = await asyncio.open_connection(*self.upstream, limit=_MAX_HEAD)
                go_on, upstream = await self._one(exchange, head, raw, reader, writer, upstream)
                if not go_on:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        finally:
            _close(writer)
            if upstream is not None:
                _close(upstream[1])
            self._tasks.discard(task)

    async def _one(self, exchange: Exchange, head: bytes, raw: bytes, client_reader: asyncio.StreamReader,
                   client: asyncio.StreamWriter, upstream: Upstream | None) -> tuple[bool, Upstream | None]:
        """Serve one request: (keep the client connection?, the upstream connection to keep)."""
        fault = exchange.fault
        if isinstance(fault, Status):
            client.write(_synthetic(fault.status, fault.retry_after, fault.message))
            await client.drain()
            exchange.delivered = True
            return True, upstream
        if isinstance(fault, Delay) and fault.where == "request":
            await asyncio.sleep(fault.seconds)
        assert upstream is not None
        up_reader, up_writer = upstream
        if isinstance(fault, CutRequest):
            up_writer.write(head + raw[:fault.after_bytes])
            await up_writer.drain()
            await asyncio.sleep(0.05)  # let the gateway start reading the body it will never finish
            _close(up_writer)
            return False, None
        up_writer.write(head + raw)
        await up_writer.drain()
        exchange.forwarded = True
        try:
            answer_head = await up_reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return False, upstream  # the gateway went away without answering: the client sees a cut
        status_line, headers = _parse_head(answer_head)
        exchange.status = int(status_line.split(" ")[1])
        exchange.request_id = _header(headers, "x-request-id")
        if isinstance(fault, Delay) and fault.where == "response":
            await asyncio.sleep(fault.seconds)
        if isinstance(fault, CutResponse) and fault.after_bytes is None:
            return False, upstream  # billed by the gateway, not a byte to the client
        client.write(answer_head)
        if exchange.websocket and exchange.status == 101:
            await self._tunnel(exchange, client_reader, client, up_reader, up_writer)
            return False, upstream
        limit = fault.after_bytes if isinstance(fault, CutResponse) else None
        whole = await self._relay_body(exchange, headers, up_reader, client, limit)
        if not whole:
            return False, upstream
        exchange.delivered = True
        if "close" in (_header(headers, "connection") or "").lower():
            return False, upstream
        return True, upstream

    async def _relay_body(self, exchange: Exchange, headers: list[tuple[str, str]],
                          up: asyncio.StreamReader, client: asyncio.StreamWriter, limit: int | None) -> bool:
        """Relay the answer's body as it arrives (SSE stays incremental); False once cut at `limit`."""

        async def send(data: bytes) -> bool:
            if limit is not None and exchange.relayed + len(data) >= limit:
                client.write(data[:limit - exchange.relayed])
                exchange.relayed = limit
                await client.drain()
                return False
            client.write(data)
            exchange.relayed += len(data)
            await client.drain()
            return True

        if exchange.status in (204, 304) or exchange.method == "HEAD":
            return limit is None or limit > 0
        if "chunked" in (_header(headers, "transfer-encoding") or "").lower():
            while True:
                line = await up.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip(), 16)
                data = line + await up.readexactly(size + 2)
                if size == 0:
                    data += b"" if data.endswith(b"\r\n\r\n") else await up.readuntil(b"\r\n")
                if not await send(data):
                    return False
                if size == 0:
                    return True
        length = _header(headers, "content-length")
        if length is not None:
            remaining = int(length)
            if remaining == 0:
                return limit is None or limit > 0
            while remaining:
                data = await up.read(min(remaining, 65536))
                if not data:
                    return False
                remaining -= len(data)
                if not await send(data):
                    return False
            return True
        while data := await up.read(65536):
            if not await send(data):
                return False
        return True

    async def _tunnel(self, exchange: Exchange, client_reader: asyncio.StreamReader,
                      client: asyncio.StreamWriter, up_reader: asyncio.StreamReader,
                      up_writer: asyncio.StreamWriter) -> None:
        """A WebSocket: bytes both ways; `CutResponse(n)` cuts after `n` bytes from the server."""
        limit = exchange.fault.after_bytes if isinstance(exchange.fault, CutResponse) else None

        async def down() -> None:
            while data := await up_reader.read(65536):
                if limit is not None and exchange.relayed + len(data) >= limit:
                    client.write(data[:limit - exchange.relayed])
                    exchange.relayed = limit
                    await client.drain()
                    client.transport.abort()  # no close frame: what a network failure looks like
                    return
                client.write(data)
                exchange.relayed += len(data)
                await client.drain()

        async def up() -> None:
            while data := await client_reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        up_writer.transport.abort()
