"""The local gateway's state in one SQLite file: keys (hashed), responses, tasks, tokens, request log."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gwlab.local.store_migrations import OWNED, migrate

KEY_PREFIX = "gwl_"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL, prefix TEXT NOT NULL,
    hash TEXT UNIQUE NOT NULL, models TEXT, status TEXT NOT NULL DEFAULT 'active', created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY, key_id INTEGER, created_at REAL NOT NULL, body TEXT NOT NULL, history TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, key_id INTEGER, kind TEXT NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS task_content (
    task_id TEXT NOT NULL, variant TEXT NOT NULL, media_type TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (task_id, variant));
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY, key_id INTEGER NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL, path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ephemeral_tokens (
    hash TEXT PRIMARY KEY, key_id INTEGER NOT NULL, model TEXT, session TEXT NOT NULL,
    expires_at REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0, key_hash TEXT);
CREATE TABLE IF NOT EXISTS request_log (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, request_id TEXT NOT NULL, key_id INTEGER, method TEXT NOT NULL,
    path TEXT NOT NULL, model TEXT, status INTEGER NOT NULL, latency_ms REAL NOT NULL,
    input_tokens INTEGER, output_tokens INTEGER, streamed INTEGER NOT NULL DEFAULT 0);
"""


def hash_secret(secret: str) -> str:
    """Keys are 256-bit random, so a plain SHA-256 is enough; the clear key is never stored."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: int
    name: str
    prefix: str
    models: tuple[str, ...] | None  # None: every model
    status: str
    created_at: float

    def allows(self, model: str) -> bool:
        return self.models is None or model in self.models


@dataclass(slots=True)
class Store:
    """Thread-safe access to the gateway database (one connection, one lock: SQLite is the bottleneck
    only far beyond what the local models can serve)."""

    path: str
    _conn: sqlite3.Connection = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute("PRAGMA secure_delete=ON")  # a deleted key's text is overwritten, not left in free pages
        self._conn.executescript(_SCHEMA)
        with self._tx() as conn:
            migrate(conn)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- keys --------------------------------------------------------------------------------
    def create_key(self, name: str, models: Sequence[str] | None = None) -> str:
        """Create a key and return it: the only time the full key exists outside its owner's hands."""
        if not name or not name.strip():
            raise ValueError("a key needs a non-empty name")
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM keys WHERE name = ?", (name,)).fetchone():
                raise ValueError(f"a key named {name!r} already exists")
            conn.execute(
                "INSERT INTO keys (name, prefix, hash, models, status, created_at) VALUES (?,?,?,?,?,?)",
                (name, secret[:10], hash_secret(secret), json.dumps(list(models)) if models else None,
                 "active", time.time()),
            )
        return secret

    def find_key(self, secret: str) -> KeyRecord | None:
        rows = self._query("SELECT * FROM keys WHERE hash = ?", (hash_secret(secret),))
        return _key(rows[0]) if rows else None

    def key_by_id(self, key_id: int) -> KeyRecord | None:
        rows = self._query("SELECT * FROM keys WHERE id = ?", (key_id,))
        return _key(rows[0]) if rows else None

    def list_keys(self) -> list[KeyRecord]:
        return [_key(r) for r in self._query("SELECT * FROM keys ORDER BY created_at, id")]

    def set_key_status(self, name: str, status: str) -> bool:
        with self._tx() as conn:
            return conn.execute("UPDATE keys SET status = ? WHERE name = ?", (status, name)).rowcount > 0

    def delete_key(self, name: str) -> bool:
        """Delete a key and, in the same transaction, everything it owns: stored responses, tasks and their
        files, ephemeral tokens. Its id is never handed out again (AUTOINCREMENT), so the request log keeps
        its rows under an id no later key can take."""
        with self._tx() as conn:
            row = conn.execute("SELECT id FROM keys WHERE name = ?", (name,)).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM task_content WHERE task_id IN (SELECT id FROM tasks WHERE key_id = ?)",
                         (row["id"],))
            for table in OWNED:
                conn.execute(f"DELETE FROM {table} WHERE key_id = ?", (row["id"],))
            conn.execute("DELETE FROM keys WHERE id = ?", (row["id"],))
        with self._lock:  # secure_delete zeroes the pages; the WAL still holds the text until it is emptied
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # best effort: a reader mid-query defers it
        return True

    # --- stored responses (previous_response_id) ----------------------------------------------
    def save_response(self, response_id: str, key_id: int, body: dict[str, Any],
                      history: list[dict[str, Any]]) -> None:
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO responses SELECT ?,?,?,?,? WHERE EXISTS "
                         "(SELECT 1 FROM keys WHERE id = ?)",
                         (response_id, key_id, time.time(), json.dumps(body), json.dumps(history), key_id))

    def load_response(self, response_id: str, key_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        rows = self._query("SELECT body, history FROM responses WHERE id = ? AND key_id = ?",
                           (response_id, key_id))
        return (json.loads(rows[0]["body"]), json.loads(rows[0]["history"])) if rows else None

    # --- tasks ---------------------------------------------------------------------------------
    def save_task(self, task_id: str, key_id: int, kind: str, body: dict[str, Any]) -> None:
        with self._tx() as conn:
            conn.execute(  # a key deleted meanwhile (a render in flight): its task is not brought back
                "INSERT INTO tasks SELECT ?,?,?,?,? WHERE EXISTS (SELECT 1 FROM keys WHERE id = ?) "
                "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
                (task_id, key_id, kind, body.get("created_at", time.time()), json.dumps(body), key_id))

    def load_task(self, task_id: str, key_id: int) -> dict[str, Any] | None:
        rows = self._query("SELECT body FROM tasks WHERE id = ? AND key_id = ?", (task_id, key_id))
        return json.loads(rows[0]["body"]) if rows else None

    def list_tasks(self, key_id: int, kind: str) -> list[dict[str, Any]]:
        rows = self._query("SELECT body FROM tasks WHERE key_id = ? AND kind = ? ORDER BY created_at, id",
                           (key_id, kind))
        return [json.loads(r["body"]) for r in rows]

    def unfinished_tasks(self) -> list[tuple[str, int, dict[str, Any]]]:
        rows = self._query("SELECT id, key_id, body FROM tasks")
        tasks = [(r["id"], r["key_id"], json.loads(r["body"])) for r in rows]
        return [t for t in tasks if t[2].get("status") in ("queued", "in_progress")]

    def delete_task(self, task_id: str, key_id: int) -> bool:
        with self._tx() as conn:
            gone = conn.execute("DELETE FROM tasks WHERE id = ? AND key_id = ?", (task_id, key_id)).rowcount
            conn.execute("DELETE FROM task_content WHERE task_id = ?", (task_id,))
        return gone > 0

    def save_content(self, task_id: str, variant: str, media_type: str, data: bytes) -> None:
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO task_content SELECT ?,?,?,? WHERE EXISTS "
                         "(SELECT 1 FROM tasks WHERE id = ?)", (task_id, variant, media_type, data, task_id))

    def load_content(self, task_id: str, variant: str) -> tuple[str, bytes] | None:
        rows = self._query("SELECT media_type, data FROM task_content WHERE task_id = ? AND variant = ?",
                           (task_id, variant))
        return (rows[0]["media_type"], bytes(rows[0]["data"])) if rows else None

    # --- files (batch inputs and results; the bytes live on disk at `path`) ---------------------------
    def save_file(self, file_id: str, key_id: int, body: dict[str, Any], path: str) -> None:
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?)",
                         (file_id, key_id, body.get("created_at", time.time()), json.dumps(body), path))

    def load_file(self, file_id: str, key_id: int) -> tuple[dict[str, Any], str] | None:
        rows = self._query("SELECT body, path FROM files WHERE id = ? AND key_id = ?", (file_id, key_id))
        return (json.loads(rows[0]["body"]), rows[0]["path"]) if rows else None

    def list_files(self, key_id: int) -> list[dict[str, Any]]:
        rows = self._query("SELECT body FROM files WHERE key_id = ? ORDER BY created_at, id", (key_id,))
        return [json.loads(r["body"]) for r in rows]

    def delete_file(self, file_id: str, key_id: int) -> str | None:
        """Forget a file; its path is returned so the caller removes the bytes."""
        with self._tx() as conn:
            row = conn.execute("SELECT path FROM files WHERE id = ? AND key_id = ?", (file_id, key_id)).fetchone()
            conn.execute("DELETE FROM files WHERE id = ? AND key_id = ?", (file_id, key_id))
        return row["path"] if row else None

    def tasks_of_kind(self, kind: str) -> list[tuple[str, int, dict[str, Any]]]:
        """Every task of a kind, all keys, oldest first (the batch worker resumes from these)."""
        rows = self._query("SELECT id, key_id, body FROM tasks WHERE kind = ? ORDER BY created_at, id", (kind,))
        return [(r["id"], r["key_id"], json.loads(r["body"])) for r in rows]

    # --- ephemeral realtime tokens ----------------------------------------------------------------
    def create_ephemeral(self, key_id: int, model: str | None, session: dict[str, Any],
                         ttl_seconds: float) -> tuple[str, float]:
        token = "ek_" + secrets.token_urlsafe(24)
        expires_at = time.time() + ttl_seconds
        with self._tx() as conn:  # bound to the key's identity (its hash), not only to its id
            conn.execute("INSERT INTO ephemeral_tokens SELECT ?, id, ?, ?, ?, 0, hash FROM keys WHERE id = ?",
                         (hash_secret(token), model, json.dumps(session), expires_at, key_id))
        return token, expires_at

    def redeem_ephemeral(self, token: str) -> tuple[int, str | None, dict[str, Any]] | None:
        """Spend a token: valid once, before it expires; afterwards it is refused."""
        with self._tx() as conn:
            row = conn.execute("SELECT t.* FROM ephemeral_tokens t JOIN keys k ON k.id = t.key_id "
                               "AND k.hash = t.key_hash WHERE t.hash = ?", (hash_secret(token),)).fetchone()
            if row is None or row["used"] or row["expires_at"] < time.time():
                return None
            conn.execute("UPDATE ephemeral_tokens SET used = 1 WHERE hash = ?", (row["hash"],))
        return row["key_id"], row["model"], json.loads(row["session"])

    # --- request log -------------------------------------------------------------------------
    def log_request(self, entry: dict[str, Any]) -> None:
        cols = ("ts", "request_id", "key_id", "method", "path", "model", "status", "latency_ms",
                "input_tokens", "output_tokens", "streamed")
        with self._tx() as conn:
            conn.execute(f"INSERT INTO request_log ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         tuple(entry.get(c) for c in cols))

    def request_log(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._query("SELECT * FROM request_log ORDER BY id")]


def _key(row: sqlite3.Row) -> KeyRecord:
    models = tuple(json.loads(row["models"])) if row["models"] else None
    return KeyRecord(row["id"], row["name"], row["prefix"], models, row["status"], row["created_at"])
