"""Answers already paid for, in SQLite, so a re-run or a resumed run sends only what is missing.

Key: SHA-256 of the endpoint and the canonical JSON body (sorted keys, compact; the body holds the
model), plus the repeat index for the extra asks of `repeats=k`. Each answer is written the moment it
arrives: `put` queues it and a flush is scheduled on the event loop's next turn, so every answer that
arrived in one loop iteration is committed in one transaction before any further request is sent.
WAL mode with synchronous=NORMAL keeps committed rows through a process crash or kill (only a power
loss may drop the last commits), and lets several processes (dask workers) share the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Checkpoint", "Entry", "canonical", "key_of", "request_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT, response TEXT NOT NULL, request_id TEXT,
    input_tokens INTEGER, output_tokens INTEGER, created REAL NOT NULL, writes INTEGER NOT NULL DEFAULT 1);
"""
_UPSERT = """
INSERT INTO answers (key, endpoint, model, response, request_id, input_tokens, output_tokens, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET response = excluded.response, request_id = excluded.request_id,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, created = excluded.created,
    writes = answers.writes + 1
"""


def canonical(body: Mapping[str, Any]) -> str:
    """The body as canonical JSON: sorted keys, no spaces, UTF-8 kept (the same request, the same text)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def request_key(endpoint: str, body: Mapping[str, Any], repeat: int = 0) -> str:
    """Checkpoint key of one request; repeat 0 is the plain request, shared with runs without repeats."""
    return key_of(endpoint, canonical(body), repeat)


def key_of(endpoint: str, canonical_body: str, repeat: int = 0) -> str:
    """`request_key` for a body already in canonical text."""
    text = f"{endpoint}\n{canonical_body}" + (f"\n#repeat={repeat}" if repeat else "")
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored answer: the gateway's JSON body as received, and what it cost."""

    response: str
    request_id: str | None
    input_tokens: int | None
    output_tokens: int | None

    def data(self) -> Any:
        return json.loads(self.response)


class Checkpoint:
    """A SQLite file of answers keyed by request; safe to share between processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # used from the run's event-loop thread; the lock guards the rare use from another thread
        self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, ...]] = []
        self.written = 0

    def get(self, key: str) -> Entry | None:
        with self._lock:
            row = self._conn.execute("SELECT response, request_id, input_tokens, output_tokens FROM answers "
                                     "WHERE key = ?", (key,)).fetchone()
        return Entry(*row) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]:
        """Entries for the keys that are stored (in chunks: SQLite caps the number of parameters)."""
        keys = list(keys)
        found: dict[str, Entry] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT key, response, request_id, input_tokens, output_tokens FROM answers "
                    f"WHERE key IN ({marks})", chunk).fetchall()
            found.update((row[0], Entry(*row[1:])) for row in rows)
        return found

    def has_many(self, keys: Iterable[str]) -> set[str]:
        keys = list(keys)
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            with self._lock:
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(f"SELECT key FROM answers WHERE key IN ({marks})", chunk).fetchall()
            found.update(row[0] for row in rows)
        return found

    def put(self, key: str, endpoint: str, model: str | None, response: str, request_id: str | None,
            input_tokens: int | None, output_tokens: int | None) -> None:
        """Store an answer: committed on the loop's next turn, or now when no loop is running."""
        self._pending.append((key, endpoint, model, response, request_id, input_tokens, output_tokens,
                              time.time()))
        if len(self._pending) > 1:
            return  # a flush is already scheduled
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            self.flush()

    def flush(self) -> None:
        """Commit every queued answer in one transaction."""
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(_UPSERT, rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._pending[:0] = rows
                raise
        self.written += len(rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r})"
