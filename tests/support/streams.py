"""Transports over the real gateway that cut or hold a streamed answer mid-way (fault injection)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import httpx


class _CutAfter(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, chunks: int) -> None:
        self._inner, self._chunks = inner, chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        count = 0
        async for chunk in self._inner:
            yield chunk
            count += 1
            if count >= self._chunks:
                raise httpx.RemoteProtocolError("peer closed connection (injected cut)")

    async def aclose(self) -> None:
        await self._inner.aclose()  # type: ignore[attr-defined]


class CuttingTransport(httpx.AsyncBaseTransport):
    """The real gateway over loopback, except that every streamed answer is cut after `chunks` chunks."""

    def __init__(self, chunks: int = 3) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self._chunks = chunks

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._real.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = _CutAfter(response.stream, self._chunks)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


_END = re.compile(rb'"finish_reason":\s*"|data: \[DONE\]|"type":\s*"(response\.completed|message_stop)"')


class _HoldEnd(httpx.AsyncByteStream):
    """Passes a stream on event by event, but holds the event that ends the answer for `hold` seconds."""

    def __init__(self, inner: httpx.AsyncByteStream, hold: float) -> None:
        self._inner, self._hold = inner, hold

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for chunk in self._inner:
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                if _END.search(event):
                    await asyncio.sleep(self._hold)  # a stalled network, bounded; a stop cancels it
                yield event + b"\n\n"
        if pending:
            yield pending

    async def aclose(self) -> None:
        await self._inner.aclose()  # type: ignore[attr-defined]


class HoldingTransport(httpx.AsyncBaseTransport):
    """The real gateway over loopback, except that a streamed answer's end is held back for `hold` seconds.

    So a test can act mid-stream (stop) however short the model's answer is."""

    def __init__(self, hold: float = 60.0) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self._hold = hold

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._real.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = _HoldEnd(response.stream, self._hold)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._real.aclose()
