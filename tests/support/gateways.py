"""The real local gateway as a test subprocess: start, stop, its keys, its CLI and its request log."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.loopback import wait_until
from tests.support.processes import start_owned

__all__ = ["RequestLog", "RunningGateway", "key_id", "make_key", "own_gateway", "run_cli", "set_key",
           "start_gateway", "stop_gateway"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may download from a model hub


@dataclass
class RunningGateway:
    """A `gwlab serve` subprocess: its URLs, its database and a key made for the test session."""

    base_url: str  # http://127.0.0.1:PORT/v1
    api_key: str = field(repr=False)
    db: Path
    process: subprocess.Popen[str] = field(repr=False)

    @property
    def api_host(self) -> str:
        return self.base_url.removesuffix("/v1")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--db", str(self.db))

    def create_key(self, name: str, models: str | None = None) -> str:
        args = ["keys", "create", "--name", name] + (["--models", models] if models else [])
        return self.cli(*args).stdout.strip()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gwlab.cli", *args], capture_output=True, text=True,
                          check=True, timeout=120)


def start_gateway(db: Path, *extra: str, key: str | None = None, stderr: int | None = None) -> RunningGateway:
    """`gwlab serve` on `db` with `extra` arguments, once it has printed its URL. `key` reuses a key already in
    the database; by default one is made in-process (the CLI's subprocess costs seconds on a busy machine),
    with a unique name, so a restarted gateway can share the database."""
    key = key or make_key(db, "tests")
    process = start_owned(  # dies with the suite, even SIGKILLed (no orphan gateway holding a port and a core)
        [sys.executable, "-m", "gwlab.cli", "serve", "--db", str(db), *extra], stdout=subprocess.PIPE,
        stderr=stderr, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise RuntimeError(f"gwlab serve did not print its URL; got {url!r}")
    return RunningGateway(url, key, db, process)


def stop_gateway(gateway: RunningGateway) -> None:
    gateway.process.terminate()
    try:
        gateway.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        gateway.process.kill()


@contextmanager
def own_gateway(db: Path, *args: str) -> Iterator[RunningGateway]:
    """A gateway of the test's own (its request log holds only the test's requests). The process may be
    replaced meanwhile (a restart on the same port): the one running at the end is stopped."""
    running = start_gateway(db, *args)
    try:
        yield running
    finally:
        stop_gateway(running)


def make_key(db: Path, name: str, models: str | None = None) -> str:
    """A key created in the gateway's database from this process; a running gateway reads keys per request,
    so it works at once."""
    from gwlab.local.store import Store

    store = Store(str(db))
    try:
        return store.create_key(f"{name}-{uuid.uuid4().hex[:6]}", models.split(",") if models else None)
    finally:
        store.close()


def key_id(db: Path, key: str) -> int:
    """The id the gateway's request log records for `key` (given by its secret)."""
    from gwlab.local.store import Store

    store = Store(str(db))
    try:
        record = store.find_key(key)
        assert record is not None
        return record.id
    finally:
        store.close()


def set_key(db: Path, key: str, action: str) -> None:
    """Disable or delete a key (given by its secret) in the gateway's database."""
    from gwlab.local.store import Store

    store = Store(str(db))
    try:
        record = store.find_key(key)
        assert record is not None
        done = store.set_key_status(record.name, "disabled") if action == "disable" else \
            store.delete_key(record.name)
        assert done
    finally:
        store.close()


@dataclass
class RequestLog:
    """The gateway's own record of what it answered (and billed), read from its SQLite file."""

    db: Path

    def mark(self, quiet: float = 0.3) -> int:
        """The last row's id once none has arrived for `quiet` seconds: a request an earlier test left in
        flight on a shared gateway is logged before the mark, not counted as the next test's."""
        last = {"id": -1, "since": time.monotonic()}

        def still() -> bool:
            with sqlite3.connect(self.db, timeout=30) as conn:
                newest = conn.execute("SELECT COALESCE(MAX(id), 0) FROM request_log").fetchone()[0]
            if newest != last["id"]:
                last.update(id=newest, since=time.monotonic())
            return time.monotonic() - last["since"] >= quiet

        wait_until(still, timeout=60, what=f"no new request-log row for {quiet:g} s")
        return int(last["id"])

    def rows(self, mark: int = 0, path: str | None = None) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db, timeout=30) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM request_log WHERE id > ? ORDER BY id", (mark,)).fetchall()
        return [dict(r) for r in rows if path is None or r["path"] == path]

    def settled(self, mark: int = 0, path: str | None = None, quiet: float = 0.5) -> list[dict[str, Any]]:
        """Rows after `mark` once none has arrived for `quiet` seconds: the gateway writes a row just
        after the last byte went out, so a client can read its answer before the row exists."""
        last = {"count": -1, "since": time.monotonic()}

        def still() -> bool:
            count = len(self.rows(mark, path))
            if count != last["count"]:
                last.update(count=count, since=time.monotonic())
            return time.monotonic() - last["since"] >= quiet

        wait_until(still, timeout=60, what=f"no new request-log row for {quiet:g} s")
        return self.rows(mark, path)

    def split(self, mark: int, at: float, path: str | None = None
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Settled rows after `mark`, as (received before `at`, received from `at` on), by the gateway's
        clock: a row's `ts` is when its answer went out, `ts - latency` when its request arrived."""
        rows = self.settled(mark, path)
        arrived = [row["ts"] - row["latency_ms"] / 1000 for row in rows]
        return ([r for r, t in zip(rows, arrived, strict=True) if t < at],
                [r for r, t in zip(rows, arrived, strict=True) if t >= at])
