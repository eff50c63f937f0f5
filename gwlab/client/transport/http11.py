"""A lean HTTP/1.1 transport under httpx for `http://` gateways on loopback (the embedded one).

Why it exists: through httpcore, h11 and anyio a small request costs ~0.5 ms of client CPU here,
more than a local model's answer needs; this transport writes head and body in one send, parses
the head with `bytes.split`, and hands httpx a body stream that yields bytes as they arrive (SSE
stays incremental). It keeps idle connections alive per host, frames bodies by Content-Length,
chunked encoding or connection close, and raises the httpx exceptions `transport.py` translates,
so errors, retries and tests see no difference. It serves only where CPU is the bound: no TLS, no
proxy; `choice.py` sends every other gateway through httpx's own transport.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = ["FastTransport"]

_MAX_HEAD = 64 * 1024
_READ_SIZE = 64 * 1024
_NO_BODY_STATUSES = frozenset({204, 304})
# a reused connection closed before the answer: resent here only for idempotent methods; a POST goes up to
# transport.py, whose retry policy knows whether its family may be resent (a video task must be looked up)
_RESENDABLE = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


class _Connection:
    __slots__ = ("key", "loop", "reader", "reused", "writer")

    def __init__(self, key: tuple[str, int], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.key, self.reader, self.writer = key, reader, writer
        self.loop = asyncio.get_running_loop()
        self.reused = False

    def usable(self) -> bool:
        # a socket belongs to the loop that opened it: one client used from two loops must not mix them
        return (self.loop is asyncio.get_running_loop() and not self.reader.at_eof()
                and not self.writer.is_closing())

    def close(self) -> None:
        if not self.loop.is_closed():  # a closed loop already dropped its sockets: nothing to do
            self.writer.close()


class _Stale(Exception):
    """A reused keep-alive connection closed before any byte of the answer: resend on a new one."""


class FastTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive for `http://` URLs, straight to the host: no TLS, no proxy."""

    def __init__(self, *, max_idle_per_host: int = 32) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._max_idle = max_idle_per_host
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"the fast path speaks http:// only, not {url.scheme}://",
                                            request=request)
        timeouts: dict[str, Any] = request.extensions.get("timeout") or {}
        key = (url.host, url.port or 80)
        payload = _head(request, await request.aread())
        head_only = request.method == "HEAD"
        for _ in range(2):
            conn = self._checkout(key) or await self._connect(key, timeouts.get("connect"), request)
            try:
                conn.writer.write(payload)
                if conn.writer.is_closing() or conn.writer.transport.get_write_buffer_size():
                    # only a buffered (or failed) write needs waiting for: a small one went out whole
                    await _timed(conn.writer.drain(), timeouts.get("write"), httpx.WriteTimeout, request)
                status, reason, headers, http10 = await _read_head(conn, timeouts.get("read"), request)
            except _Stale as exc:
                conn.close()
                if request.method not in _RESENDABLE:  # RFC 9110 §9.2.2: the server may have acted on it
                    raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                                    request=request) from exc
                continue
            except BaseException:
                conn.close()
                raise
            break
        else:  # pragma: no cover - two stale connections in a row
            raise httpx.RemoteProtocolError("Server disconnected without a response.", request=request)
        framing, length, keep = _framing(headers, status, head_only)
        keep = keep and not http10  # HTTP/1.0 closes unless it negotiates otherwise: never reuse it
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": reason}
        if framing == "length" and _buffered(conn.reader) >= length:
            # the whole body came with the head (a small answer does): hand it over read, sparing the
            # answer httpx's five layers of async iterators (~60 µs a call); it cannot fail or wait now
            body = await conn.reader.readexactly(length)
            if keep:
                self._release(conn)
            else:
                conn.close()
            return httpx.Response(status, headers=headers, content=body, extensions=extensions)
        stream = _Body(self, conn, framing, length, keep, timeouts.get("read"), request)
        return httpx.Response(status, headers=headers, stream=stream, extensions=extensions)

    def _checkout(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return None

    def _release(self, conn: _Connection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if self._closed or len(idle) >= self._max_idle or not conn.usable():
            conn.close()
        else:
            idle.append(conn)

    async def _connect(self, key: tuple[str, int], timeout: float | None,
                       request: httpx.Request) -> _Connection:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=_MAX_HEAD)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect timed out after {timeout}s", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Connection(key, reader, writer)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


def _buffered(reader: asyncio.StreamReader) -> int:
    """Bytes the reader already holds (its buffer is private, but stable since Python 3.4; 0 if ever renamed)."""
    return len(getattr(reader, "_buffer", b""))


def _head(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    chunked = False
    for name, value in request.headers.raw:
        if name.lower() == b"transfer-encoding":  # the body is read whole: send its length instead
            chunked = True
            continue
        lines.append(name + b": " + value)
    if chunked:
        lines.append(b"Content-Length: " + str(len(body)).encode("ascii"))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _read_head(conn: _Connection, timeout: float | None,
                     request: httpx.Request) -> tuple[int, bytes, list[tuple[bytes, bytes]], bool]:
    while True:  # 1xx answers (100 Continue, 103 Early Hints) precede the real one
        try:
            async with asyncio.timeout(timeout):
                head = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial and conn.reused:
                raise _Stale from exc
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                            request=request) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError("response head too large", request=request) from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {timeout}s", request=request) from exc
        except OSError as exc:
            if conn.reused:
                raise _Stale from exc
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        lines = head[:-4].split(b"\r\n")
        try:
            version, code, reason = [*lines[0].split(b" ", 2), b""][:3]
            status = int(code)
        except ValueError as exc:
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}",
                                            request=request) from exc
        if not version.startswith(b"HTTP/1."):
            raise httpx.RemoteProtocolError(f"unsupported protocol {version[:20]!r}", request=request)
        if status >= 200 or status == 101:
            headers = []
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers.append((name.strip(), value.strip()))
            return status, reason, headers, version == b"HTTP/1.0"


def _framing(headers: list[tuple[bytes, bytes]], status: int, head_only: bool) -> tuple[str, int, bool]:
    """("none" | "length" | "chunked" | "close", content length, connection reusable)."""
    length, chunked, keep = -1, False, True
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-length":
            try:
                length = int(value)
            except ValueError:
                keep = False
        elif lowered == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lowered == b"connection":
            keep = keep and b"close" not in value.lower()
    if head_only or status in _NO_BODY_STATUSES or status < 200:
        return "none", 0, keep
    if chunked:
        return "chunked", -1, keep
    if length >= 0:
        return "length", length, keep
    return "close", -1, False


async def _timed(awaitable: Any, timeout: float | None, error: type[httpx.TimeoutException],
                 request: httpx.Request) -> Any:
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError as exc:
        raise error(f"timed out after {timeout}s", request=request) from exc
    except OSError as exc:
        raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from exc


class _Body(httpx.AsyncByteStream):
    """The answer's body as it arrives; the connection goes back to the pool only once it is whole."""

    def __init__(self, transport: FastTransport, conn: _Connection, framing: str, length: int, keep: bool,
                 timeout: float | None, request: httpx.Request) -> None:
        self._transport, self._conn = transport, conn
        self._framing, self._length, self._keep = framing, length, keep
        self._timeout, self._request = timeout, request
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reader, timeout, request = self._conn.reader, self._timeout, self._request
        try:
            if self._framing == "length":
                remaining = self._length
                while remaining:
                    async with asyncio.timeout(timeout):
                        chunk = await reader.read(min(remaining, _READ_SIZE))
                    if not chunk:
                        raise httpx.RemoteProtocolError(
                            f"peer closed connection without sending complete message body: "
                            f"{self._length - remaining} of {self._length} bytes", request=request)
                    remaining -= len(chunk)
                    yield chunk
            elif self._framing == "chunked":
                while True:
                    async with asyncio.timeout(timeout):
                        line = await reader.readuntil(b"\r\n")
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        async with asyncio.timeout(timeout):
                            while await reader.readuntil(b"\r\n") != b"\r\n":
                                pass  # trailer fields: ignored
                        break
                    async with asyncio.timeout(timeout):
                        data = await reader.readexactly(size + 2)
                    yield data[:-2]
            elif self._framing == "close":
                while True:
                    async with asyncio.timeout(timeout):
                        chunk = await reader.read(_READ_SIZE)
                    if not chunk:
                        break
                    yield chunk
        except asyncio.IncompleteReadError as exc:
            self._abandon()
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body: incomplete chunked read",
                request=request) from exc
        except TimeoutError as exc:
            self._abandon()
            raise httpx.ReadTimeout(f"no data within {timeout}s", request=request) from exc
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            self._abandon()
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        self._done = True
        if self._keep:
            self._transport._release(self._conn)
        else:
            self._conn.close()

    def _abandon(self) -> None:
        self._done = True
        self._conn.close()

    async def aclose(self) -> None:
        if not self._done:  # closed before the body ended: the connection is mid-message, unusable
            self._abandon()
