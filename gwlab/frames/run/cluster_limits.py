"""Rate limits held by the dask.distributed scheduler: one limit for every worker on every host.

`ClusterLimits` is a scheduler plugin, so its state lives in the scheduler process and survives the loss
of any worker (an Actor lives on a worker and would die with it). Workers reach it with one RPC per
request, and it needs no file:

- `gwlab_limit_acquire`: requests wait in one first-come queue per limit name; the scheduler answers
  when the request may go, by the requests/min and tokens/min buckets (`limiter._Bucket`, the same
  arithmetic as the one-process `TokenBucket`) and the pause. The scheduler holds the answer rather than
  telling the worker how long to sleep, so a 429 that arrives meanwhile also delays requests already
  queued, and clocks of different hosts never need to agree (only the scheduler's clock is read).
- `gwlab_limit_pause`: a 429's Retry-After pauses the limit for every worker; nothing accrues meanwhile,
  so the limit resumes at its rate, not with a burst.
- `gwlab_limit_settle`: gives back (or charges) the difference between estimated and real tokens.
- `gwlab_slot_acquire` / `gwlab_slot_release`: requests in flight across the cluster (`max_in_flight`);
  the slots of a worker that leaves (killed, lost host) are returned at once (`remove_worker`).

`ClusterLimiter` is the worker side: the runner's `Limiter` protocol over those calls. It registers the
plugin itself on first use (idempotent), so no step on the client is needed.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
import uuid
from typing import Any

from distributed import get_worker
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from gwlab.frames.run.limiter import DEFAULT_BURST_SECONDS, _Bucket
from gwlab.frames.run.runner import Answer, Sender
from gwlab.wire.families import ProtocolFamily

__all__ = ["ClusterLimiter", "ClusterLimits"]

PLUGIN_NAME = "gwlab-cluster-limits"


class _Limit:
    """One named limit at the scheduler: its buckets, its pause and its queue of waiting requests."""

    def __init__(self) -> None:
        self.config: tuple[float | None, float | None, float] | None = None
        self.requests: _Bucket | None = None
        self.tokens: _Bucket | None = None
        self.stamp = time.monotonic()
        self.paused_until = 0.0
        self.queue: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self.pump: asyncio.Task[None] | None = None

    def configure(self, requests_per_minute: float | None, tokens_per_minute: float | None, burst: float) -> None:
        """Set the rates (the latest caller's, if two runs share a name with different limits)."""
        config = (requests_per_minute, tokens_per_minute, burst)
        if config == self.config:
            return
        self.config = config
        self.requests = _Bucket(requests_per_minute, burst) if requests_per_minute else None
        self.tokens = _Bucket(tokens_per_minute, burst) if tokens_per_minute else None

    def refill(self, now: float) -> None:
        elapsed = now - self.stamp
        if elapsed > 0:
            self.stamp = now
            for bucket in (self.requests, self.tokens):
                if bucket is not None:
                    bucket.refill(elapsed)

    def wait(self, tokens: int, now: float) -> float:
        return max(self.paused_until - now, self.requests.wait(1) if self.requests else 0.0,
                   self.tokens.wait(tokens) if self.tokens else 0.0)

    def take(self, tokens: int) -> None:
        if self.requests is not None:
            self.requests.level -= 1
        if self.tokens is not None:
            self.tokens.level -= tokens

    async def run(self) -> None:
        """Let the queue's head go as soon as the buckets and the pause allow, in arrival order."""
        try:
            while self.queue:
                tokens, waiter = self.queue[0]
                if waiter.done():  # the caller gave up
                    self.queue.popleft()
                    continue
                now = time.monotonic()
                self.refill(now)
                wait = self.wait(tokens, now)
                if wait > 0:
                    await asyncio.sleep(wait)  # then look again: a pause may have come meanwhile
                    continue
                self.take(tokens)
                self.queue.popleft()
                waiter.set_result(None)
        finally:
            self.pump = None


class _Slots:
    """Requests in flight across the cluster for one name: leases, each held by a worker."""

    def __init__(self) -> None:
        self.leases: dict[str, str] = {}  # lease -> worker address
        self.changed = asyncio.Condition()


class ClusterLimits(SchedulerPlugin):
    """The scheduler's side: limits by name, shared by every worker of the cluster."""

    idempotent = True
    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._limits: dict[str, _Limit] = {}
        self._slots: dict[str, _Slots] = {}
        self._scheduler: Any = None

    # synchronous: registration stays atomic on the scheduler loop (distributed annotates a coroutine, but
    # awaits the result only when it is awaitable)
    def start(self, scheduler: Any) -> None:  # type: ignore[override]
        self._scheduler = scheduler
        scheduler.handlers.update({
            "gwlab_limit_acquire": self.acquire, "gwlab_limit_settle": self.settle,
            "gwlab_limit_pause": self.pause, "gwlab_slot_acquire": self.acquire_slot,
            "gwlab_slot_release": self.release_slot, "gwlab_limit_state": self.state})

    def _limit(self, name: str) -> _Limit:
        return self._limits.setdefault(name, _Limit())

    async def acquire(self, name: str, requests_per_minute: float | None, tokens_per_minute: float | None,
                      burst: float, tokens: int) -> None:
        """Answer when one request of `tokens` estimated tokens may go."""
        limit = self._limit(name)
        limit.configure(requests_per_minute, tokens_per_minute, burst)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        limit.queue.append((tokens, waiter))
        if limit.pump is None:
            limit.pump = asyncio.ensure_future(limit.run())
        try:
            await waiter
        finally:
            waiter.cancel()  # a caller that went away: the pump skips it

    def settle(self, name: str, estimated: int, actual: int) -> None:
        limit = self._limit(name)
        if limit.tokens is not None:
            limit.tokens.level = min(limit.tokens.capacity, limit.tokens.level + estimated - actual)

    def pause(self, name: str, seconds: float) -> None:
        """Hold every request of the limit for `seconds`; nothing accrues while paused."""
        limit = self._limit(name)
        now = time.monotonic()
        limit.refill(now)
        limit.paused_until = max(limit.paused_until, now + max(0.0, seconds))
        limit.stamp = max(limit.stamp, limit.paused_until)

    def state(self, name: str) -> dict[str, Any]:
        """The limit's queue length and pause, and the slots in use (for tests and diagnostics)."""
        limit, slots = self._limits.get(name), self._slots.get(name)
        return {"queued": len(limit.queue) if limit else 0,
                "paused_for": max(0.0, limit.paused_until - time.monotonic()) if limit else 0.0,
                "in_flight": len(slots.leases) if slots else 0}

    async def acquire_slot(self, name: str, limit: int, lease: str, worker: str) -> None:
        slots = self._slots.setdefault(name, _Slots())
        async with slots.changed:
            await slots.changed.wait_for(lambda: len(slots.leases) < limit)
            if worker in self._scheduler.workers:  # a worker that left while it waited holds nothing
                slots.leases[lease] = worker

    async def release_slot(self, name: str, lease: str) -> None:
        slots = self._slots.get(name)
        if slots is not None and slots.leases.pop(lease, None) is not None:
            async with slots.changed:
                slots.changed.notify_all()

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        """A worker that left (killed, lost host) gives its slots back."""
        for slots in self._slots.values():
            lost = [lease for lease, owner in slots.leases.items() if owner == worker]
            for lease in lost:
                del slots.leases[lease]
            if lost:
                task = asyncio.ensure_future(_notify(slots))
                _notifying.add(task)  # kept until done: a task nobody references may be collected
                task.add_done_callback(_notifying.discard)


_notifying: set[asyncio.Future[None]] = set()


async def _notify(slots: _Slots) -> None:
    async with slots.changed:
        slots.changed.notify_all()


_registered: set[str] = set()  # scheduler addresses this process has registered the plugin with
_registered_lock = threading.Lock()


class ClusterLimiter:
    """A run's `Limiter` on a dask worker: every decision is the scheduler's (`ClusterLimits`)."""

    def __init__(self, name: str, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None, *, burst: float = DEFAULT_BURST_SECONDS,
                 max_in_flight: int | None = None, worker: Any = None) -> None:
        self.name = name
        self._config = {"requests_per_minute": requests_per_minute, "tokens_per_minute": tokens_per_minute,
                        "burst": burst}
        self.max_in_flight = max_in_flight
        self._worker = worker if worker is not None else get_worker()
        self._pausing: concurrent.futures.Future[Any] | None = None
        self.waited = 0.0

    @property
    def counts_tokens(self) -> bool:
        return bool(self._config["tokens_per_minute"])

    def _submit(self, op: str, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Call the scheduler from any thread: the RPC runs on the worker's own event loop."""
        worker = self._worker

        async def call() -> Any:
            address = worker.scheduler.address
            if address not in _registered:
                await worker.scheduler.register_scheduler_plugin(plugin=dumps(ClusterLimits()), name=PLUGIN_NAME,
                                                                 idempotent=True)
                with _registered_lock:
                    _registered.add(address)
            return await getattr(worker.scheduler, op)(**kwargs)

        from tornado.platform.asyncio import BaseAsyncIOLoop

        loop = worker.loop
        assert isinstance(loop, BaseAsyncIOLoop), "a dask worker's IOLoop runs on asyncio"
        return asyncio.run_coroutine_threadsafe(call(), loop.asyncio_loop)

    async def _call(self, op: str, **kwargs: Any) -> Any:
        return await asyncio.wrap_future(self._submit(op, **kwargs))

    async def acquire(self, tokens: int = 0) -> None:
        """Wait for the scheduler's go; a pause this worker just asked for is in force first."""
        if self._pausing is not None:
            await asyncio.wrap_future(self._pausing)
        started = time.monotonic()
        await self._call("gwlab_limit_acquire", name=self.name, tokens=int(tokens), **self._config)
        self.waited += time.monotonic() - started

    def settle(self, estimated: int, actual: int) -> None:
        if self.counts_tokens and estimated != actual:
            self._submit("gwlab_limit_settle", name=self.name, estimated=int(estimated), actual=int(actual))

    def pause(self, seconds: float) -> None:
        """Hold every worker of the cluster for `seconds` (a 429's Retry-After)."""
        self._pausing = self._submit("gwlab_limit_pause", name=self.name, seconds=float(seconds))

    async def state(self) -> dict[str, Any]:
        state: dict[str, Any] = await self._call("gwlab_limit_state", name=self.name)
        return state

    def in_flight(self, send: Sender) -> Sender:
        """`send` holding one of the cluster's `max_in_flight` slots per attempt (unchanged without one)."""
        if not self.max_in_flight:
            return send
        address = self._worker.address

        async def send_in_slot(family: ProtocolFamily, body: dict[str, Any]) -> Answer:
            lease = uuid.uuid4().hex
            await self._call("gwlab_slot_acquire", name=self.name, limit=self.max_in_flight, lease=lease,
                             worker=address)
            try:
                return await send(family, body)
            finally:
                self._submit("gwlab_slot_release", name=self.name, lease=lease)

        return send_in_slot
