"""Where a console's work runs, and how its results reach the widget.

A cell that opens a console must return at once: the browser's widget messages reach the kernel only
while it is idle. So the gateway I/O runs as tasks on the gateway's own loop (the private loop thread
of a sync `Gateway`, or the running loop for an `AsyncGateway`), and every widget update is handed to
the kernel's loop with `call_soon_threadsafe`, so traits change and comm messages leave from the
thread that owns them. Without a running kernel loop (a script, a test) updates apply at once.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.connection import current_gateway

__all__ = ["Bridge", "Throttle"]

T = TypeVar("T")
log = logging.getLogger("gwlab.widgets")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Bridge:
    """Runs coroutines on the gateway's loop; posts widget updates to the kernel's loop."""

    def __init__(self, gw: Gateway | AsyncGateway | None = None) -> None:
        if gw is None:  # the gateway the user connected, as the magics and df.gw use (one per kernel)
            gw = current_gateway()
        if isinstance(gw, Gateway):
            self.gateway: AsyncGateway = gw.twin
            self.io_loop = gw.loop.loop
        elif isinstance(gw, AsyncGateway):
            loop = _running_loop()
            if loop is None:
                raise RuntimeError("an AsyncGateway console needs a running event loop; pass a Gateway "
                                   "(gwlab.connect()) instead")
            self.gateway, self.io_loop = gw, loop
        else:
            raise TypeError(f"expected a gwlab Gateway (gwlab.connect()); got {type(gw).__name__}")
        self.ui_loop = _running_loop()  # the kernel's loop when built in a notebook cell
        self._pending: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._lock = threading.Lock()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the gateway's loop; cancelling the future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coro, self.io_loop)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a plain callable on the gateway's loop (cheap work that touches its state)."""
        if _running_loop() is self.io_loop:
            fn(*args)
        else:
            self.io_loop.call_soon_threadsafe(fn, *args)

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Apply a widget update on the kernel's loop (at once when there is none, or we are on it).

        Updates queue in order; the kernel's loop applies them when it is free, or `wait()` does first."""
        loop = self.ui_loop
        if loop is None or loop.is_closed() or not loop.is_running() or _running_loop() is loop:
            self.drain()  # what was queued earlier goes first
            _guarded(fn, *args)
            return
        with self._lock:
            self._pending.append((fn, args))
        loop.call_soon_threadsafe(self.drain)

    def wait(self, done: threading.Event, timeout: float | None, what: str) -> bool:
        """Block until `done` is set, then apply its updates here, so a cell that submitted and waits reads
        the final traits (its own loop cannot run them while the cell runs). True; TimeoutError saying what
        is still running when `timeout` passed first."""
        if _running_loop() is self.io_loop and not done.is_set():
            raise RuntimeError(f"wait() would block the event loop the {what} runs on (an AsyncGateway's); "
                               f"pass a Gateway (gwlab.connect()) to wait from a cell, or let the cell return")
        ended = done.wait(timeout)
        self.drain()
        if not ended:
            raise TimeoutError(f"the {what} is still running after {timeout} s; wait again, or stop it")
        return True

    def drain(self) -> None:
        """Apply the queued updates now, on the calling thread (the kernel's, in a `wait()`)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                fn, args = self._pending.popleft()
            _guarded(fn, *args)


def _guarded(fn: Callable[..., Any], *args: Any) -> None:
    # a failing update must not kill the loop callback chain, nor vanish: it is logged
    try:
        fn(*args)
    except Exception:
        log.exception("widget update failed")


class Throttle:
    """At most one `flush()` per `interval` seconds, and the last change is never lost.

    `poke()` says "something changed"; the flush runs now if the interval has passed, else once at
    its end. Called on one event loop (the gateway's); `clock` is injectable for tests.
    """

    def __init__(self, flush: Callable[[], None], interval: float = 0.05, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._flush, self.interval, self._clock = flush, interval, clock
        self._last = float("-inf")
        self._handle: asyncio.TimerHandle | None = None
        self._lock = threading.Lock()
        self.flushes = 0

    def poke(self) -> None:
        with self._lock:
            if self._handle is not None:
                return
            wait = self._last + self.interval - self._clock()
            if wait > 0:
                loop = _running_loop()
                if loop is not None:
                    self._handle = loop.call_later(wait, self._fire)
                    return
        self._fire()

    def flush_now(self) -> None:
        """Flush at once (the end of a stream), cancelling a pending timed flush."""
        self.cancel()
        self._fire()

    def cancel(self) -> None:
        """Drop a pending timed flush (the final state is published some other way)."""
        with self._lock:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None

    def _fire(self) -> None:
        with self._lock:
            self._handle = None
            self._last = self._clock()
            self.flushes += 1
        self._flush()
