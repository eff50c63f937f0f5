"""Shared by the pandas-layer tests (imported, not a conftest: sibling conftests share one module name)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)

QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Is this urgent?"},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": {"billing": "payments, invoices and refunds", "tech": "bugs, outages and errors"}},
    "severity": {"type": "score", "criteria": ["minor annoyance", "major problem", "critical outage"]},
}


@dataclass
class RequestLog:
    """The gateway's own record of what it answered (and billed), read from its SQLite file."""

    db: Path

    def mark(self) -> int:
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT COALESCE(MAX(id), 0) FROM request_log").fetchone()[0]

    def since(self, mark: int, path: str = "/v1/decisions") -> list[dict]:
        """Rows logged after `mark`. The gateway logs a request just after its last byte went out, so a
        client can read its answer before the row exists: wait until the count holds for 0.3 s."""
        seen, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 0.3:
            count = len(self._rows(mark, path))
            if count != seen:
                seen, stable_since = count, time.monotonic()
            time.sleep(0.05)
        return self._rows(mark, path)

    def split(self, mark: int, at: float, path: str = "/v1/decisions") -> tuple[list[dict], list[dict]]:
        """Rows after `mark`, as (received before `at`, received from `at` on), by the gateway's clock.

        A row's `ts` is when its answer went out; `ts - latency` is when its request arrived."""
        rows = self.since(mark, path)
        arrived = [row["ts"] - row["latency_ms"] / 1000 for row in rows]
        return ([r for r, t in zip(rows, arrived, strict=True) if t < at],
                [r for r, t in zip(rows, arrived, strict=True) if t >= at])

    def _rows(self, mark: int, path: str) -> list[dict]:
        with sqlite3.connect(self.db) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM request_log WHERE id > ? AND path = ? ORDER BY id",
                                (mark, path)).fetchall()
        return [dict(r) for r in rows]


TICKETS = {
    "ticket": ["The payment page crashes and nobody can check out",
               "Please send me a copy of last month's invoice",
               "I was charged twice for my subscription",
               "Small typo on the pricing page"],
    "customer": ["acme", "globex", "initech", "umbrella"],
}


def tickets_frame() -> pd.DataFrame:
    return pd.DataFrame(TICKETS, index=pd.Index([101, 102, 103, 104], name="ticket_id"))
