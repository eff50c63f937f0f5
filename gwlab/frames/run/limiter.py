"""Rate limits shared by every row of a run: requests/min and tokens/min buckets, and a common pause.

One limiter serves all the run's workers, so the sum of their traffic respects the limit (a limiter per
worker would let the sum overrun it, NOTES.md). A 429 pauses every worker until its Retry-After has
passed, not only the one that hit it. Token costs are estimated before sending and settled with the
real count afterwards.

Each bucket holds `burst` seconds of quota (10 s by default): a run starts smoothly instead of spending
a minute's quota at once. A request costing more than the bucket holds is let through when the bucket
is full and leaves it in debt, so a large request waits but never deadlocks.

`SharedTokenBucket` keeps the same state in a SQLite table, so processes and threads that share the file
(dask workers on one machine, without a dask.distributed scheduler) share one limit. Workers on several
hosts share the scheduler's instead (`cluster_limits.ClusterLimiter`, the same `_Bucket` arithmetic).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

__all__ = ["Limiter", "SharedTokenBucket", "TokenBucket"]

DEFAULT_BURST_SECONDS = 10.0


class Limiter(Protocol):
    @property
    def counts_tokens(self) -> bool: ...

    async def acquire(self, tokens: int) -> None: ...

    def settle(self, estimated: int, actual: int) -> None: ...

    def pause(self, seconds: float) -> None: ...


class _Bucket:
    """A refilling level; `rate` per second up to `capacity`."""

    __slots__ = ("capacity", "level", "rate")

    def __init__(self, per_minute: float, burst: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst)
        self.level = self.capacity

    def refill(self, elapsed: float) -> None:
        self.level = min(self.capacity, self.level + elapsed * self.rate)

    def wait(self, cost: float) -> float:
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


class TokenBucket:
    """Requests per minute and tokens per minute for one process; either may be None (no limit)."""

    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None, *,
                 burst: float = DEFAULT_BURST_SECONDS, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._requests = _Bucket(requests_per_minute, burst) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute, burst) if tokens_per_minute else None
        self._clock, self._sleep = clock, sleep
        self._stamp = clock()
        self._paused_until = 0.0
        self._lock: asyncio.Lock | None = None  # made on first use, inside the run's event loop
        self.waited = 0.0  # seconds spent waiting, for the run summary

    @property
    def counts_tokens(self) -> bool:
        """Whether `acquire` needs a token estimate (a tokens-per-minute limit is set)."""
        return self._tokens is not None

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of `tokens` estimated tokens may go; first come, first served."""
        if self._requests is None and self._tokens is None and self._clock() >= self._paused_until:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            while True:
                now = self._clock()
                wait = self._paused_until - now
                if wait <= 0:
                    self._refill(now)
                    wait = max(self._requests.wait(1) if self._requests else 0.0,
                               self._tokens.wait(tokens) if self._tokens else 0.0)
                    if wait <= 0:
                        if self._requests:
                            self._requests.level -= 1
                        if self._tokens:
                            self._tokens.level -= tokens
                        return
                self.waited += wait
                await self._sleep(wait)

    def settle(self, estimated: int, actual: int) -> None:
        """Give back (or charge) the difference once the real token count is known."""
        if self._tokens is not None:
            self._tokens.level = min(self._tokens.capacity, self._tokens.level + estimated - actual)

    def pause(self, seconds: float) -> None:
        """Hold every worker for `seconds` (a 429's Retry-After)."""
        self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    def _refill(self, now: float) -> None:
        elapsed, self._stamp = now - self._stamp, now
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.refill(elapsed)


_SCHEMA = """CREATE TABLE IF NOT EXISTS limiter (
    name TEXT PRIMARY KEY, requests REAL, tokens REAL, stamp REAL NOT NULL, paused_until REAL NOT NULL)"""


class SharedTokenBucket:
    """The same buckets in a SQLite row, for every process and thread using the file.

    Each acquire is one short `BEGIN IMMEDIATE` transaction (refill, check, take) run in a thread so the
    event loop is not blocked while another process holds the lock. Wall-clock time (`time.time`) is
    used because monotonic clocks are per process. One machine only: SQLite locking over a network
    file system is not reliable.
    """

    def __init__(self, path: str | Path, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None, *, name: str = "default",
                 burst: float = DEFAULT_BURST_SECONDS) -> None:
        self.path, self.name = str(path), name
        self._rpm, self._tpm = requests_per_minute, tokens_per_minute
        self._rcap = max(1.0, requests_per_minute / 60 * burst) if requests_per_minute else None
        self._tcap = max(1.0, tokens_per_minute / 60 * burst) if tokens_per_minute else None
        self.waited = 0.0
        self._execute(_SCHEMA)
        self._execute("INSERT OR IGNORE INTO limiter VALUES (?, ?, ?, ?, 0)",
                      (name, self._rcap, self._tcap, time.time()))

    @property
    def counts_tokens(self) -> bool:
        return bool(self._tpm)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def _execute(self, sql: str, params: tuple[object, ...] = ()) -> None:
        conn = self._connect()
        try:
            conn.execute(sql, params)  # autocommit: one statement, one transaction
        finally:
            conn.close()

    def _try(self, tokens: int) -> float:
        """Take one request now if allowed (0.0), else the seconds to wait."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            requests, level, stamp, paused = conn.execute(
                "SELECT requests, tokens, stamp, paused_until FROM limiter WHERE name = ?", (self.name,)
            ).fetchone()
            now = time.time()
            if paused > now:
                conn.execute("COMMIT")
                return float(paused - now)
            elapsed = max(0.0, now - stamp)
            wait = 0.0
            if self._rpm and self._rcap is not None:  # a cap whenever there is a rate
                requests = min(self._rcap, (requests or 0.0) + elapsed * self._rpm / 60)
                need = 1.0
                wait = max(wait, 0.0 if requests >= need else (need - requests) * 60 / self._rpm)
            if self._tpm and self._tcap is not None:
                level = min(self._tcap, (level or 0.0) + elapsed * self._tpm / 60)
                need = min(float(tokens), self._tcap)
                wait = max(wait, 0.0 if level >= need else (need - level) * 60 / self._tpm)
            if wait <= 0:
                requests = requests - 1 if self._rpm else requests
                level = level - tokens if self._tpm else level
            conn.execute("UPDATE limiter SET requests = ?, tokens = ?, stamp = ? WHERE name = ?",
                         (requests, level, now, self.name))
            conn.execute("COMMIT")
            return wait
        finally:
            conn.close()

    async def acquire(self, tokens: int = 0) -> None:
        while True:
            wait = await asyncio.to_thread(self._try, tokens)
            if wait <= 0:
                return
            self.waited += wait
            await asyncio.sleep(wait)

    def settle(self, estimated: int, actual: int) -> None:
        if self._tpm and estimated != actual:
            self._execute("UPDATE limiter SET tokens = MIN(?, tokens + ?) WHERE name = ?",
                          (self._tcap, estimated - actual, self.name))

    def pause(self, seconds: float) -> None:
        self._execute("UPDATE limiter SET paused_until = MAX(paused_until, ?) WHERE name = ?",
                      (time.time() + max(0.0, seconds), self.name))
