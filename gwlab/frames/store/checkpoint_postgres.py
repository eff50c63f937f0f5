"""Answers already paid for, in PostgreSQL: the checkpoint that dask workers on every host can reach.

The same key and the same rule as the SQLite file (`checkpoint.py`): an answer is committed the moment it
arrives (`put` hands it to the writer thread, which commits every queued answer in one transaction). What
a server adds:

- **The schema is created on first use**, under a transaction-level advisory lock, so workers starting
  together do not race on `CREATE TABLE`.
- **One row per request, whatever the race**: the key is the primary key and answers are written with
  `INSERT ... ON CONFLICT (key) DO UPDATE` (`writes` counts how often a row was written: 1 unless a
  `refresh=True` run asked again).
- **A claim**, so a request another live worker is already asking is not asked twice: before sending, a
  worker takes a session-level advisory lock on the request's key and keeps it until the answer is
  committed. A worker that finds the key locked waits for the answer instead of paying for it again.
  The lock belongs to the worker's connection: a worker killed mid-request (SIGKILL, a lost host) loses
  its connection and PostgreSQL drops its locks at once, so nobody waits on a dead worker's claim.
- **Run records** (`gwlab.frames.run.records`) go to `gwlab_runs`, appended, one row per run.
- **No key is stored**: rows hold the body's hash, the answer, its request id and token counts. The URL
  may hold a password; `repr`, `path` and every error show it masked (`mask_url`). Prefer a URL without
  one and the `PGPASSWORD` environment variable (or `~/.pgpass`) on each worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gwlab.frames.store.checkpoint import CommitOnArrival, Entry, mask_url

__all__ = ["PostgresCheckpoint"]

_SCHEMA_LOCK = 0x67776C6162  # "gwlab": one advisory lock id for creating the table
_SCHEMA = """
CREATE TABLE IF NOT EXISTS gwlab_answers (
    key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT, response TEXT NOT NULL, request_id TEXT,
    input_tokens BIGINT, output_tokens BIGINT, created DOUBLE PRECISION NOT NULL,
    writes INTEGER NOT NULL DEFAULT 1, gateway TEXT);
CREATE TABLE IF NOT EXISTS gwlab_runs (
    seq BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, started TEXT NOT NULL, record TEXT NOT NULL, detail TEXT)
"""
_UPSERT = """
INSERT INTO gwlab_answers (key, endpoint, model, response, request_id, input_tokens, output_tokens, created, gateway)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (key) DO UPDATE SET response = excluded.response, request_id = excluded.request_id,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, created = excluded.created,
    gateway = excluded.gateway, writes = gwlab_answers.writes + 1
"""
_COLUMNS = "response, request_id, input_tokens, output_tokens, created, gateway"
CLAIM_POLL_SECONDS = 0.05  # how often a worker waiting on another's claim looks for its answer


def _lock_id(key: str) -> int:
    """The advisory lock of a request: the first 64 bits of its SHA-256 key (a collision only makes
    two different requests wait for each other, never share an answer)."""
    return int.from_bytes(bytes.fromhex(key[:16]), "big", signed=True)


class PostgresCheckpoint(CommitOnArrival):
    """Answers keyed by request in a PostgreSQL table, shared by every process that reaches the server."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the dask extra installs it
            raise ImportError("a postgresql:// checkpoint needs psycopg: pip install 'gwlab[dask]'") from exc
        self._url = url
        self.path = mask_url(url)  # what the run summary and the repr show
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self._conn.execute(_SCHEMA)
        except psycopg.Error as exc:
            raise ConnectionError(f"checkpoint {self.path}: {self._scrub(exc)}") from None
        self._lock = threading.Lock()
        self._held: set[str] = set()  # keys this connection has claimed and not yet answered
        self._init_writer()

    def _scrub(self, exc: BaseException) -> str:
        """An error's text with the URL's password removed, whatever the driver put in it."""
        from urllib.parse import unquote, urlsplit

        text = str(exc).strip() or type(exc).__name__
        password = urlsplit(self._url).password
        for secret in {s for s in (password, unquote(password or "")) if s}:
            text = text.replace(secret, "***")
        return text

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def get(self, key: str) -> Entry | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM gwlab_answers WHERE key = %s", (key,))
        return Entry(*rows[0]) if rows else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]:
        rows = self._rows(f"SELECT key, {_COLUMNS} FROM gwlab_answers WHERE key = ANY(%s)", (list(keys),))
        return {row[0]: Entry(*row[1:]) for row in rows}

    def has_many(self, keys: Iterable[str]) -> set[str]:
        rows = self._rows("SELECT key FROM gwlab_answers WHERE key = ANY(%s)", (list(keys),))
        return {row[0] for row in rows}

    async def claim(self, key: str) -> Entry | None:
        """Wait until this connection holds the request's claim (None: send it) or another worker's
        answer is stored (the answer: do not send). Bounded by the other worker's request: its claim
        ends when its answer is committed, when it gives up, or when its connection dies."""
        lock = _lock_id(key)
        while True:
            if self._rows("SELECT pg_try_advisory_lock(%s)", (lock,))[0][0]:
                entry = self.get(key)  # answered between the caller's look-up and this claim
                if entry is None:
                    self._held.add(key)
                    return None
                self._unlock([key])
                return entry
            entry = self.get(key)
            if entry is not None:
                return entry
            await asyncio.sleep(CLAIM_POLL_SECONDS)

    def release(self, key: str) -> None:
        if key in self._held:
            self._held.discard(key)
            self._unlock([key])

    def _unlock(self, keys: list[str]) -> None:
        self._rows("SELECT count(pg_advisory_unlock(k)) FROM unnest(%s::bigint[]) AS k",
                   ([_lock_id(key) for key in keys],))

    @contextlib.contextmanager
    def _writer_session(self) -> Iterator[Callable[[list[tuple[Any, ...]]], None]]:
        """The writer thread commits on the store's one connection (a claim is that connection's lock)."""
        yield self._commit

    def _commit(self, rows: list[tuple[Any, ...]]) -> None:
        """Every row in one transaction, then end their claims."""
        with self._lock, self._conn.transaction(), self._conn.cursor() as cursor:
            cursor.executemany(_UPSERT, rows)
        answered = [row[0] for row in rows if row[0] in self._held]
        if answered:
            self._held.difference_update(answered)
            self._unlock(answered)

    def __len__(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM gwlab_answers", ())[0][0])

    def add_run(self, run_id: str, started: str, record: str, detail: str | None) -> None:
        """Append one run: its facts and its answer keys (JSON texts); an existing run is never changed."""
        with self._lock:
            self._conn.execute("INSERT INTO gwlab_runs (run_id, started, record, detail) VALUES (%s, %s, %s, %s)",
                               (run_id, started, record, detail))

    def run_records(self) -> list[str]:
        """Every run's facts (JSON text), oldest first."""
        return [row[0] for row in self._rows("SELECT record FROM gwlab_runs ORDER BY seq", ())]

    def run_detail(self, run_id: str) -> str | None:
        """One run's answer keys, statuses and index (JSON text)."""
        rows = self._rows("SELECT detail FROM gwlab_runs WHERE run_id = %s", (run_id,))
        return rows[0][0] if rows else None

    def close(self) -> None:
        """Commit what is queued and disconnect (which also ends any claim left)."""
        try:
            self._stop_writer()
        finally:
            with self._lock:
                self._conn.close()

    def __repr__(self) -> str:
        return f"PostgresCheckpoint({self.path!r})"
