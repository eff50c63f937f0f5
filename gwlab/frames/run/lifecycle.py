"""What every run shares, whatever it sends (rows or tasks): its progress bar, how it is stopped, and how
its workers are driven to the end so that nothing paid for is lost on the way out."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from gwlab.frames.store.checkpoint import AnswerStore

__all__ = ["Commits", "Progress", "Stoppable", "drive"]


class Progress:
    """A tqdm bar over rows (or nothing, with `progress=False`): the one bar every runner shows."""

    def __init__(self, enabled: bool, total: int, description: str) -> None:
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, unit="row", desc=description, leave=True)
        self.done = 0

    def advance(self, rows: int) -> None:
        """`rows` more rows are finished."""
        self.done += rows
        if self._bar is not None and rows:
            self._bar.update(rows)

    def reach(self, finished: int, **counts: int) -> None:
        """`finished` rows are finished in all; `counts` (submitted, running...) shown beside the bar."""
        if finished > self.done:
            self.advance(finished - self.done)
        if self._bar is not None and counts:
            self._bar.set_postfix(**counts, finished=finished, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            with contextlib.suppress(Exception):  # a closed notebook output must not fail a paid run
                self._bar.close()


class Stoppable:
    """`stop(reason)`: send nothing more; what is in flight finishes and is checkpointed. The first
    reason wins (a budget stop stays a budget stop when Ctrl-C follows)."""

    _stopping: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        self._stopping = self._stopping or reason

    @property
    def stopping(self) -> str | None:
        return self._stopping


class Commits:
    """The store's commits as the event loop sees them: `watch(job, stored)` calls `on_stored(job)` on the
    loop once that answer is committed (not if its commit failed), every commit of one writer group in one
    wake-up of the loop.

    Why not an asyncio future per answer (`asyncio.wrap_future`): the writer thread then woke the loop
    (a write to its self-pipe) once per answer, in the loop thread's hottest path; here it wakes it once
    per group. (The writer appends before it looks whether a wake-up is scheduled, and the loop clears
    that mark before it takes what arrived, so no commit is left unseen.)"""

    def __init__(self, on_stored: Callable[[int], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_stored = on_stored
        self._arrived: deque[tuple[int, concurrent.futures.Future[None]]] = deque()
        self._scheduled = False
        self._outstanding = 0
        self._settled = asyncio.Event()

    def watch(self, job: int, stored: concurrent.futures.Future[None]) -> None:
        self._outstanding += 1
        stored.add_done_callback(functools.partial(self._arrive, job))

    def _arrive(self, job: int, stored: concurrent.futures.Future[None]) -> None:
        """In the writer's thread (or here, when it was committed already)."""
        self._arrived.append((job, stored))
        if not self._scheduled:
            self._scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to tell
                self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        while self._arrived:
            job, stored = self._arrived.popleft()
            self._outstanding -= 1
            if not stored.cancelled() and stored.exception() is None:
                self._on_stored(job)
        if not self._outstanding:
            self._settled.set()

    async def settled(self) -> None:
        """Return once every commit watched so far has been seen here."""
        while self._outstanding:
            self._settled.clear()
            await self._settled.wait()


async def drive(workers: list[Coroutine[Any, Any, None]], store: AnswerStore | None, bar: Progress) -> None:
    """Run a run's workers to their end. On any failure (Ctrl-C included) the others are cancelled and
    waited for; either way, the answers that arrived are flushed to the store and the bar is closed."""
    tasks = [asyncio.ensure_future(worker) for worker in workers]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if store is not None:
            store.flush()
        bar.close()
