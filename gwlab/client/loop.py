"""A private event loop on a daemon thread: how the sync facade runs coroutines, even in Jupyter.

A Jupyter cell already runs inside the kernel's event loop, so `asyncio.run` refuses to start and
patching that loop (nest_asyncio, unmaintained) re-enters it. Instead each sync gateway owns a loop
on its own thread and hands it coroutines; the calling thread just waits for the result. The
caller's context variables (the ledger's `run` label) travel with each coroutine.

`close()` is idempotent and quiet: it first awaits a cleanup coroutine on the loop (the httpx
client closes its sockets on the loop that opened them, so nothing later warns "Event loop is
closed"), cancels what is left, then stops and closes the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """Runs coroutines to completion on a private loop; `run` blocks the calling thread only."""

    def __init__(self, name: str = "gwlab-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the private loop and return its result (or raise its exception)."""
        if self._closed:
            coro.close()
            raise RuntimeError("this gateway is closed; create a new one (gwlab.connect())")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync gwlab call was made on its own loop thread; await the async twin")
        # run_coroutine_threadsafe schedules through a handle that copies this thread's context, and
        # the task is created inside it: the caller's context variables travel with the coroutine
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt in a notebook stops the request too
            raise

    def close(self, cleanup: Callable[[], Awaitable[object]] | None = None, timeout: float = 10.0) -> None:
        """Await `cleanup()` on the loop, cancel leftover tasks, stop and close the loop. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        loop = self._loop
        if threading.current_thread() is self._thread:  # from a finalizer on the loop thread: no waiting
            loop.call_soon(loop.stop)
            return
        if loop.is_closed() or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(_shutdown(loop, cleanup), loop)
        with contextlib.suppress(Exception):
            future.result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            loop.close()


async def _shutdown(loop: asyncio.AbstractEventLoop, cleanup: Callable[[], Awaitable[object]] | None) -> None:
    if cleanup is not None:
        with contextlib.suppress(Exception):
            await cleanup()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks(loop) if task is not current]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
