"""Fakes of the client tests: fault-injecting bodies, canned answers and a stand-in for the local gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from gwlab.frames.run.limiter import TokenBucket

CANARY_KEY = "gwk-canary-5f3e9d1c7b2a4e6f8091"
BASE_URL = "http://gateway.test/v1"

Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


class Chunks(httpx.AsyncByteStream):
    """A response body arriving in pieces, optionally cut by `error` after the last one."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks, self.error = chunks, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error is not None:
            raise self.error


def sse_bytes(*payloads: Any, named: bool = False) -> bytes:
    """One SSE event per payload (dicts become JSON; `named` adds `event: <type>`)."""
    out = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        head = f"event: {payload['type']}\n" if named and isinstance(payload, dict) else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


def sse_response(chunks: list[bytes], error: Exception | None = None, **headers: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream", **headers},
                          stream=Chunks(chunks, error))


def chat_body(text: str = "Hello", **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}, **extra}


@dataclass
class FakeLocal:
    """What `gwlab.local.start()` returns, without starting anything: for tests of `connect()`."""

    base_url: str = "http://127.0.0.1:9/v1"
    api_key: str = field(default=CANARY_KEY, repr=False)
    stopped: int = 0

    def stop(self) -> None:
        self.stopped += 1


class PauseSpy(TokenBucket):
    """A limiter that records each pause a run asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.paused: list[float] = []

    def pause(self, seconds: float) -> None:
        self.paused.append(seconds)
        super().pause(seconds)
