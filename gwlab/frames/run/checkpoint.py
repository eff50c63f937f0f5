"""Answers already paid for, in SQLite, so a re-run or a resumed run sends only what is missing.

Key: SHA-256 of the gateway (its normalized base URL, `gateway_id`), the endpoint and the canonical JSON
body (sorted keys, compact; the body holds the model), plus the repeat index for the extra asks of
`repeats=k`. An answer is one gateway's: two gateways serving the same model id (staging and production,
the local one and a hosted one) never share answers. The embedded gateway's is its identity instead
(`local:...`, frames/_client.checkpoint_origin), which a restart on another port keeps. Files written
before the gateway was part of the key keep their rows (their `gateway` column is NULL) but no key can
reach them: they are never served.

Each answer is written the moment it arrives: `put` queues it and a flush is scheduled on the event
loop's next turn, so every answer that arrived in one loop iteration is committed in one transaction
before any further request is sent.
WAL mode with synchronous=NORMAL keeps committed rows through a process crash or kill (only a power
loss may drop the last commits), and lets several processes (dask workers) share the file.

Each store also keeps the run records (`gwlab.frames.run.records`): one row per `df.gw` run, appended when it
ends and never changed (the SQLite table refuses updates and deletes), in table `runs` (`gwlab_runs`).

Two implementations of one small interface (`AnswerStore`), chosen by `open_checkpoint` (stores.py): a
path is this SQLite file (one machine), a `postgresql://` URL a PostgreSQL database every host can reach
(`checkpoint_postgres.PostgresCheckpoint`). Same key, same commit-on-arrival rule.
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
from typing import Any, Protocol, Self, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["AnswerStore", "Checkpoint", "CommitOnArrival", "Entry", "canonical", "gateway_id", "is_store_url", "key_of",
           "mask_url", "request_key"]

_URL_SCHEMES = ("postgresql://", "postgres://")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT, response TEXT NOT NULL, request_id TEXT,
    input_tokens INTEGER, output_tokens INTEGER, created REAL NOT NULL, writes INTEGER NOT NULL DEFAULT 1,
    gateway TEXT);
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, started TEXT NOT NULL, record TEXT NOT NULL,
    detail TEXT);
CREATE TRIGGER IF NOT EXISTS runs_append_only BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'run records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS runs_keep_all BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'run records are append-only'); END;
"""
_UPSERT = """
INSERT INTO answers (key, endpoint, model, response, request_id, input_tokens, output_tokens, created, gateway)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET response = excluded.response, request_id = excluded.request_id,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, created = excluded.created,
    gateway = excluded.gateway, writes = answers.writes + 1
"""


def canonical(body: Mapping[str, Any]) -> str:
    """The body as canonical JSON: sorted keys, no spaces, UTF-8 kept (the same request, the same text)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def gateway_id(base_url: str) -> str:
    """A gateway's identity in the checkpoint: its base URL with scheme and host lower-cased, a default
    port and trailing slashes dropped (`HTTP://Host:80/v1/` and `http://host/v1` are one gateway); words
    after the URL (a fixed decisions route, "decisions_path=/systemone") are kept as they are."""
    url, _, qualifier = base_url.strip().partition(" ")
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    normalized = urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))
    return f"{normalized} {qualifier.strip()}" if qualifier.strip() else normalized


def request_key(gateway: str, endpoint: str, body: Mapping[str, Any], repeat: int = 0) -> str:
    """Checkpoint key of one request to one gateway (`gateway_id`); repeat 0 is the plain request,
    shared with runs without repeats."""
    return key_of(gateway, endpoint, canonical(body), repeat)


def key_of(gateway: str, endpoint: str, canonical_body: str, repeat: int = 0) -> str:
    """`request_key` for a body already in canonical text. The `gateway=` line also makes every key
    differ from the keys of files written before the gateway was part of it, so those are never served."""
    text = f"gateway={gateway}\n{endpoint}\n{canonical_body}" + (f"\n#repeat={repeat}" if repeat else "")
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored answer: the gateway's JSON body as received, what it cost, which gateway gave it, when."""

    response: str
    request_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    created: float | None = None  # epoch seconds when the answer arrived
    gateway: str | None = None  # `gateway_id` of the gateway that answered

    def data(self) -> Any:
        return json.loads(self.response)


@runtime_checkable
class AnswerStore(Protocol):
    """What the runner needs of a checkpoint: read answers, claim a request, store an answer on arrival."""

    path: Any  # where it lives, for the run summary (a URL with its password masked)

    def get(self, key: str) -> Entry | None: ...

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]: ...

    def has_many(self, keys: Iterable[str]) -> set[str]: ...

    async def claim(self, key: str) -> Entry | None:
        """Before sending: None once this run may ask `key`; the answer if another worker stored it."""
        ...

    def release(self, key: str) -> None:
        """Give up a claim without an answer (the request failed or was not sent)."""
        ...

    def put(self, key: str, endpoint: str, model: str | None, response: str, request_id: str | None,
            input_tokens: int | None, output_tokens: int | None, gateway: str | None = None) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def is_store_url(spec: object) -> bool:
    """Whether a `checkpoint=` value names a database server rather than a file."""
    return isinstance(spec, str) and spec.lower().startswith(_URL_SCHEMES)


def mask_url(url: str) -> str:
    """The URL with its password replaced by `***`: what a repr, a log line or an error may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


class CommitOnArrival:
    """`put` for both stores: an answer is queued and committed, with every answer that arrived in the same
    event-loop iteration, in one transaction on the loop's next turn (now when no loop is running)."""

    _pending: list[tuple[Any, ...]]

    def put(self, key: str, endpoint: str, model: str | None, response: str, request_id: str | None,
            input_tokens: int | None, output_tokens: int | None, gateway: str | None = None) -> None:
        """Store an answer and the `gateway_id` that gave it."""
        self._pending.append((key, endpoint, model, response, request_id, input_tokens, output_tokens,
                              time.time(), gateway))
        if len(self._pending) > 1:
            return  # a flush is already scheduled
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            self.flush()

    def flush(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Checkpoint(CommitOnArrival):
    """A SQLite file of answers keyed by request; safe to share between processes of one machine.

    It keeps no claims: two processes asking the same new request at once both send it (the second
    answer overwrites the first, counted in `writes`). The PostgreSQL store claims requests.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # used from the run's event-loop thread; the lock guards the rare use from another thread
        self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._migrate()
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, ...]] = []
        self.written = 0

    def _migrate(self) -> None:
        """A file from before the gateway was recorded gets the column; its old rows stay NULL there and
        unreachable (their keys lack the gateway). Two processes may race to add it: one wins."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(answers)")}
        if "gateway" in columns:
            return
        try:
            self._conn.execute("ALTER TABLE answers ADD COLUMN gateway TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise

    def get(self, key: str) -> Entry | None:
        with self._lock:
            row = self._conn.execute("SELECT response, request_id, input_tokens, output_tokens, created, gateway "
                                     "FROM answers WHERE key = ?", (key,)).fetchone()
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
                    f"SELECT key, response, request_id, input_tokens, output_tokens, created, gateway "
                    f"FROM answers WHERE key IN ({marks})", chunk).fetchall()
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

    async def claim(self, key: str) -> Entry | None:
        """No claims in a file: the caller may always send."""
        return None

    def release(self, key: str) -> None:
        """Nothing to release (no claims)."""

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

    def add_run(self, run_id: str, started: str, record: str, detail: str | None) -> None:
        """Append one run: its facts and its answer keys (JSON texts); an existing run is never changed."""
        with self._lock:
            self._conn.execute("INSERT INTO runs (run_id, started, record, detail) VALUES (?, ?, ?, ?)",
                               (run_id, started, record, detail))

    def run_records(self) -> list[str]:
        """Every run's facts (JSON text), oldest first."""
        with self._lock:
            return [row[0] for row in self._conn.execute("SELECT record FROM runs ORDER BY seq")]

    def run_detail(self, run_id: str) -> str | None:
        """One run's answer keys, statuses and index (JSON text)."""
        with self._lock:
            row = self._conn.execute("SELECT detail FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r})"
