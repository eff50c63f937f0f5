"""Helpers for widget tests: bounded polling, and a transport that cuts a real stream mid-way."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

TEXT_MODEL = "local/gemma-3-270m"
DECIDE_MODEL = "local/decide-e5-small"
REALTIME_MODEL = "local/realtime-gemma-3-270m"
PROMPT = "Q: What is the capital of France?\nA:"


def wait_until(predicate: Callable[[], Any], timeout: float = 120.0, interval: float = 0.05) -> Any:
    """Poll `predicate` until it is truthy; fail with its last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:g} s (last value {value!r})")
        time.sleep(interval)
        value = predicate()
    return value


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
