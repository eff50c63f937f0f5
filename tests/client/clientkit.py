"""Helpers of the client tests: fault-injecting bodies and canned answers (imported by the tests)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

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
