"""Server-sent events and the bridge from a blocking engine iterator to the event loop."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from starlette.responses import StreamingResponse

T = TypeVar("T")
_END = object()


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One event, JSON on a single data line, always ended by a blank line (protocols.md section 1)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def sse_response(events: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream; charset=utf-8",
                             headers={"cache-control": "no-cache", **(headers or {})})


async def iterate_in_thread(make: Callable[[threading.Event], Iterator[T]]) -> AsyncIterator[T]:
    """Run a blocking generator in a worker thread and yield its items on the event loop.

    `make` receives a stop event: when the consumer goes away (client disconnect, cancel), the event is
    set so the engine stops generating instead of burning CPU for nobody."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in make(stop):
                if stop.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # handed over to the consumer, raised there
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _END)

    # in the caller's context: the engine reads whose turn it is from it (engines/turns.py)
    worker = loop.run_in_executor(None, contextvars.copy_context().run, pump)
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()  # the worker thread ends at its next item; nobody waits for it
        del worker
