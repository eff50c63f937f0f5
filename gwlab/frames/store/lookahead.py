"""Requests prepared ahead of the workers: body, canonical text, checkpoint key and stored answer.

Why: looking each request up in the checkpoint with its own SELECT cost a frames run about a sixth of
its client CPU per row (docs/benchmarks.md, issue 32 point 9). The workers take requests in order from
one iterator, so the next `WINDOW` requests are prepared together and their stored answers read in one
`get_many`. A request is still claimed (`AnswerStore.claim`) just before it is sent, so a store that
claims (PostgreSQL) still sends each request once; a SQLite file keeps no claims, and two processes
asking the same new request at once both send it, as before (docs/guide: checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.frames.store.checkpoint import AnswerStore, Entry, canonical, key_of

__all__ = ["Lookahead", "Prepared"]

WINDOW = 256
# a request as a worker takes it: its body, canonical JSON ("" when nothing needs it), checkpoint key ("" without
# a checkpoint) and the answer the checkpoint already holds (None: send it)
Prepared = tuple[dict[str, Any], str, str, Entry | None]
_BAD_BODY = (InvalidRequest, ValueError, TypeError)  # a row whose request cannot be built: that row's error


class Lookahead:
    """`take(job, repeat)` for jobs taken in increasing order; a window is prepared when its first job is taken."""

    def __init__(self, body_of: Callable[[int], dict[str, Any]], key_parts: tuple[str, str], *, jobs: int,
                 repeats: int, needs_text: bool, store: AnswerStore | None, look_up: bool) -> None:
        self._body_of, self._gateway, self._endpoint = body_of, *key_parts
        self._jobs, self._repeats, self._needs_text = jobs, repeats, needs_text
        self._store, self._look_up = store, look_up and store is not None
        self._ready: dict[tuple[int, int], Prepared | Exception] = {}

    def take(self, job: int, repeat: int) -> Prepared:
        """The prepared request; raises the error that building its body raised."""
        if not self._look_up:  # nothing to read ahead: prepare on demand
            return self._prepare(job, repeat)
        found = self._ready.pop((job, repeat), None)
        if found is None:
            self._fill(job)
            found = self._ready.pop((job, repeat))
        if isinstance(found, Exception):
            raise found
        return found

    def _prepare(self, job: int, repeat: int) -> Prepared:
        body = self._body_of(job)
        # the canonical text costs a sorted JSON dump: only made when a key or an estimate needs it
        text = canonical(body) if self._needs_text else ""
        key = key_of(self._gateway, self._endpoint, text, repeat) if self._store is not None else ""
        return body, text, key, None

    def _fill(self, first: int) -> None:
        prepared: dict[tuple[int, int], Prepared | Exception] = {}
        for job in range(first, min(self._jobs, first + WINDOW)):
            for repeat in range(self._repeats):
                try:
                    prepared[job, repeat] = self._prepare(job, repeat)
                except _BAD_BODY as exc:
                    prepared[job, repeat] = exc
        assert self._store is not None
        stored = self._store.get_many([p[2] for p in prepared.values() if not isinstance(p, Exception)])
        for slot, p in prepared.items():
            self._ready[slot] = p if isinstance(p, Exception) else (p[0], p[1], p[2], stored.get(p[2]))
