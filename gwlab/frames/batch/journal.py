"""The batch journal: which provider batch jobs a checkpoint's rows are in, written before each submit.

One row per submission, in the checkpoint's own SQLite file (table `batch_jobs`): a submission token,
the custom ids it carries (each one a checkpoint key, so the custom id <-> row map is the checkpoint's
own), then the job id once the provider answered, its status, counts and cost. The row exists before
the submit call is made, so a kernel killed at any point finds either a job id to poll or a token to
look the job up by; per-row errors of a collected job go to `batch_errors`, keyed like the answers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_jobs (
    token TEXT PRIMARY KEY, api TEXT NOT NULL, gateway TEXT NOT NULL, endpoint TEXT NOT NULL, model TEXT,
    job_id TEXT, status TEXT NOT NULL, created REAL NOT NULL, custom_ids TEXT NOT NULL, counts TEXT,
    cost REAL, billed_input INTEGER, billed_output INTEGER, collected INTEGER NOT NULL DEFAULT 0,
    description TEXT);
CREATE TABLE IF NOT EXISTS batch_errors (
    custom_id TEXT NOT NULL, token TEXT NOT NULL, kind TEXT NOT NULL, error TEXT NOT NULL,
    PRIMARY KEY (custom_id, token));
"""
SUBMITTING = "submitting"  # the row is written, the submit call not answered yet


@dataclass(frozen=True, slots=True)
class JournalEntry:
    token: str
    api: str
    gateway: str
    endpoint: str
    model: str | None
    job_id: str | None
    status: str
    created: float
    custom_ids: tuple[str, ...]
    counts: dict[str, int]
    cost: float | None
    billed_input: int
    billed_output: int
    collected: bool
    description: str | None


class Journal:
    """The batch jobs of one checkpoint file. Every write commits at once (a kill loses nothing written)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _run(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cursor = self._conn.execute(sql, args)
            cursor.row_factory = sqlite3.Row
            return cursor.fetchall()

    def begin(self, token: str, api: str, gateway: str, endpoint: str, model: str | None,
              custom_ids: Sequence[str], description: str | None = None) -> None:
        """Record a submission before it is sent."""
        self._run("INSERT INTO batch_jobs (token, api, gateway, endpoint, model, status, created, custom_ids, "
                  "description) VALUES (?,?,?,?,?,?,?,?,?)",
                  (token, api, gateway, endpoint, model, SUBMITTING, time.time(), json.dumps(list(custom_ids)),
                   description))

    def submitted(self, token: str, job_id: str, status: str) -> None:
        self._run("UPDATE batch_jobs SET job_id = ?, status = ? WHERE token = ?", (job_id, status, token))

    def update(self, token: str, status: str, counts: dict[str, int]) -> None:
        self._run("UPDATE batch_jobs SET status = ?, counts = ? WHERE token = ?", (status, json.dumps(counts), token))

    def collected(self, token: str, status: str, counts: dict[str, int], cost: float, billed: tuple[int, int],
                  errors: Iterable[tuple[str, str, str]]) -> None:
        """A terminal job's results are in the checkpoint: its errors and what it billed, in one transaction."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO batch_errors VALUES (?,?,?,?)",
                                       [(cid, token, kind, err) for cid, kind, err in errors])
                self._conn.execute("UPDATE batch_jobs SET status = ?, counts = ?, cost = ?, billed_input = ?, "
                                   "billed_output = ?, collected = 1 WHERE token = ?",
                                   (status, json.dumps(counts), cost, billed[0], billed[1], token))
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def abandon(self, token: str, reason: str) -> None:
        """A submission that provably never created a job (refused before acceptance)."""
        self._run("UPDATE batch_jobs SET status = ?, collected = 1, counts = ? WHERE token = ?",
                  ("not_submitted", json.dumps({"reason": reason}), token))

    def entries(self, *, gateway: str | None = None, open_only: bool = False) -> list[JournalEntry]:
        sql, args = "SELECT * FROM batch_jobs", []
        where = []
        if gateway is not None:
            where.append("gateway = ?")
            args.append(gateway)
        if open_only:
            where.append("collected = 0")
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [_entry(r) for r in self._run(sql + " ORDER BY created", args)]

    def entry(self, token: str) -> JournalEntry | None:
        rows = self._run("SELECT * FROM batch_jobs WHERE token = ?", (token,))
        return _entry(rows[0]) if rows else None

    def errors_for(self, custom_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """custom_id -> (kind, error) of the newest collected job that errored it."""
        wanted = list(custom_ids)
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i:i + 500]
            rows = self._run("SELECT e.custom_id, e.kind, e.error FROM batch_errors e JOIN batch_jobs j "
                             f"ON e.token = j.token WHERE e.custom_id IN ({','.join('?' * len(part))}) "
                             "ORDER BY j.created", part)
            out.update({r["custom_id"]: (r["kind"], r["error"]) for r in rows})
        return out


def _entry(row: sqlite3.Row) -> JournalEntry:
    return JournalEntry(row["token"], row["api"], row["gateway"], row["endpoint"], row["model"], row["job_id"],
                        row["status"], row["created"], tuple(json.loads(row["custom_ids"])),
                        json.loads(row["counts"]) if row["counts"] else {}, row["cost"],
                        row["billed_input"] or 0, row["billed_output"] or 0, bool(row["collected"]),
                        row["description"])
