"""What every run shares, whatever it sends (rows or tasks): its progress bar, how it is stopped, and how
its workers are driven to the end so that nothing paid for is lost on the way out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from gwlab.frames.store.checkpoint import AnswerStore

__all__ = ["Progress", "Stoppable", "drive"]


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
