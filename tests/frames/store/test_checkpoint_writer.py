"""The checkpoint's writer thread (issue 32 point 9): answers are committed off the event loop, in groups;
a row counts as done only once its answer is on disk, and the run keeps sending meanwhile."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.frames._client import Connection
from gwlab.frames.run.runner import Answer
from gwlab.frames.store.checkpoint import Checkpoint
from gwlab.wire.families import ProtocolFamily

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}
ROWS = 12


def stored(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


class GatedCheckpoint(Checkpoint):
    """A SQLite checkpoint whose commits wait for `gate` (a slow disk), or fail (a broken one)."""

    def __init__(self, path: Path, gate: threading.Event | None = None, fail: bool = False) -> None:
        super().__init__(path)
        self.gate, self.fail, self.groups, self.timed_out = gate, fail, 0, False

    @contextlib.contextmanager
    def _writer_session(self) -> Iterator[Callable[[list[tuple[Any, ...]]], None]]:
        with super()._writer_session() as commit:
            def gated(rows: list[tuple[Any, ...]]) -> None:
                if self.fail:
                    raise sqlite3.OperationalError("disk I/O error")
                if self.gate is not None and not self.gate.wait(30):  # bounded: a runner that waited for
                    self.timed_out = True  # its commits before sending again would stall here
                commit(rows)
                self.groups += 1

            yield gated


class Sender:
    """Answers every decision; opens the gate at its second request; notes how many answers were on disk
    at each request (`path`)."""

    def __init__(self, gate: threading.Event | None = None, path: Path | None = None) -> None:
        self.sent, self.gate, self.path = 0, gate, path
        self.on_disk_when_sent: list[int] = []

    async def send(self, family: ProtocolFamily, body: dict[str, Any]) -> Answer:
        self.sent += 1
        if self.path is not None:
            self.on_disk_when_sent.append(stored(self.path) if self.path.exists() else 0)
        await asyncio.sleep(0)
        if self.gate is not None and self.sent == 2:
            self.gate.set()
        data = {"model": body["model"], "usage": {"input_tokens": 10, "output_tokens": 0},
                "answers": {"urgent": {"type": "noul", "noul": 0.7}}}
        return Answer(data, json.dumps(data), f"req_{self.sent}")


def frame() -> pd.DataFrame:
    return pd.DataFrame({"text": [f"ticket {i}" for i in range(ROWS)]})


def test_put_resolves_its_future_only_once_the_answer_is_readable_from_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    gate = threading.Event()
    with GatedCheckpoint(path, gate) as store:
        done = store.put("k1", "/decisions", "m", "{}", "req_1", 1, 0, "http://gw/v1")
        assert not done.done()  # held at the gate: not on disk, not done
        assert stored(path) == 0
        gate.set()
        done.result(timeout=30)
        assert stored(path) == 1 and store.written == 1


def test_a_run_keeps_sending_while_its_answers_commit_and_ends_only_once_all_are_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    gate = threading.Event()
    store = GatedCheckpoint(path, gate)
    sender = Sender(gate, path)
    try:
        # one worker: if it waited for its answer's commit before sending again, the gate (opened by the
        # second request) would hold the first commit for its whole 30 s
        out = frame().gw.decide("{text}", QUESTIONS, gateway=Connection(sender.send), checkpoint=store,
                                concurrency=1, progress=False)
        assert not store.timed_out and sender.on_disk_when_sent[:2] == [0, 0]  # sent on before the 1st was saved
        # but never with two of its answers off disk: before request n, answers 1..n-2 are saved
        assert all(saved >= n - 2 for n, saved in enumerate(sender.on_disk_when_sent, start=1))
        assert stored(path) == ROWS and out.run.sent == ROWS  # the run returned after every commit
    finally:
        store.close()


def test_a_commit_that_fails_fails_the_run_rather_than_counting_unsaved_rows(tmp_path: Path) -> None:
    store = GatedCheckpoint(tmp_path / "answers.sqlite", fail=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
            frame().gw.decide("{text}", QUESTIONS, gateway=Connection(Sender().send), checkpoint=store,
                              concurrency=2, progress=False)
        assert stored(tmp_path / "answers.sqlite") == 0
        store.fail = False
        store.flush()  # what failed stays queued: the next flush writes it
        assert stored(tmp_path / "answers.sqlite") > 0
    finally:
        store.close()


def test_answers_put_from_several_threads_at_once_are_all_committed_and_their_futures_resolved(
        tmp_path: Path) -> None:
    """`put` takes no lock while the writer lingers or commits: answers queued meanwhile are never lost."""
    path = tmp_path / "c.sqlite"
    with Checkpoint(path) as store:
        store.LINGER_SECONDS = 0.0005
        futures: list[Any] = []

        def putter(thread: int) -> None:
            for i in range(500):
                futures.append(store.put(f"{thread}-{i}", "/decisions", "m", "{}", None, 1, 0))
                if i % 97 == 0:
                    threading.Event().wait(0.002)  # let the writer go idle now and then

        threads = [threading.Thread(target=putter, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        concurrent.futures.wait(futures, timeout=30)
        assert all(f.done() and f.exception() is None for f in futures)
    assert stored(path) == 2000
