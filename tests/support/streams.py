"""Transports over the real gateway that cut or hold a streamed answer mid-way (fault injection)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable

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


class _StreamFault(httpx.AsyncBaseTransport):
    """The real gateway over loopback, with each streamed (SSE) answer's body passed through `fault`."""

    def __init__(self, fault: Callable[[httpx.AsyncByteStream], httpx.AsyncByteStream]) -> None:
        self._real, self._fault = httpx.AsyncHTTPTransport(), fault

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._real.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = self._fault(response.stream)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


class CuttingTransport(_StreamFault):
    """The real gateway over loopback, except that every streamed answer is cut after `chunks` chunks."""

    def __init__(self, chunks: int = 3) -> None:
        super().__init__(lambda inner: _CutAfter(inner, chunks))


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


class HoldingTransport(_StreamFault):
    """The real gateway over loopback, except that a streamed answer's end is held back for `hold` seconds.

    So a test can act mid-stream (stop) however short the model's answer is."""

    def __init__(self, hold: float = 60.0) -> None:
        super().__init__(lambda inner: _HoldEnd(inner, hold))
