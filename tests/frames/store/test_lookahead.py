"""Requests prepared a window ahead (issue 32 point 9): the checkpoint is read in one query per window,
never per row, and a resumed run still serves exactly what is stored and sends exactly what is not."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.errors import InvalidRequest
from gwlab.frames._client import Connection
from gwlab.frames.run.runner import Answer
from gwlab.frames.store import lookahead
from gwlab.frames.store.checkpoint import Checkpoint, Entry
from gwlab.wire.families import ProtocolFamily

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}


class CountingCheckpoint(Checkpoint):
    """A SQLite checkpoint that counts its look-ups."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gets = 0
        self.get_many_sizes: list[int] = []

    def get(self, key: str) -> Entry | None:
        self.gets += 1
        return super().get(key)

    def get_many(self, keys: Any) -> dict[str, Entry]:
        keys = list(keys)
        self.get_many_sizes.append(len(keys))
        return super().get_many(keys)


class Sender:
    def __init__(self) -> None:
        self.states: list[str] = []
        self.lock = threading.Lock()

    async def send(self, family: ProtocolFamily, body: dict[str, Any]) -> Answer:
        with self.lock:
            self.states.append(body["state"])
        data = {"model": body["model"], "usage": {"input_tokens": 10, "output_tokens": 0},
                "answers": {"urgent": {"type": "noul", "noul": 0.25 if "odd" in body["state"] else 0.75}}}
        return Answer(data, json.dumps(data), f"req_{len(self.states)}")


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"text": [f"ticket {i} {'odd' if i % 2 else 'even'}" for i in range(rows)]})


def test_a_resumed_run_reads_the_checkpoint_once_per_window_and_sends_only_what_is_missing(tmp_path: Path) -> None:
    rows = 2 * lookahead.WINDOW + 37
    path = tmp_path / "answers.sqlite"
    first = Sender()
    with Checkpoint(path) as store:  # the first run answers every other row only
        frame(rows).iloc[::2].gw.decide("{text}", QUESTIONS, gateway=Connection(first.send), checkpoint=store,
                                        progress=False)
    second = Sender()
    with CountingCheckpoint(path) as store:
        out = frame(rows).gw.decide("{text}", QUESTIONS, gateway=Connection(second.send), checkpoint=store,
                                    concurrency=8, progress=False)
        assert store.gets == 0 and store.get_many_sizes == [lookahead.WINDOW, lookahead.WINDOW, 37]
    assert sorted(second.states) == sorted(frame(rows)["text"].iloc[1::2])  # the odd rows, each once
    assert out.run.cached == len(first.states) and out.run.sent == rows // 2
    expected = [0.25 if i % 2 else 0.75 for i in range(rows)]  # each row its own answer, served or sent
    assert out["urgent__noul"].tolist() == expected


def test_a_row_whose_request_cannot_be_built_fails_alone_inside_a_window() -> None:
    def body_of(job: int) -> dict[str, Any]:
        if job == 3:
            raise InvalidRequest("state", "not a state")
        return {"model": "m", "state": str(job)}

    class Store:
        def get_many(self, keys: list[str]) -> dict[str, Entry]:
            return {}

    ahead = lookahead.Lookahead(body_of, ("gw", "/decisions"), jobs=6, repeats=2, needs_text=True,
                                store=Store(), look_up=True)  # type: ignore[arg-type]
    taken = [ahead.take(job, r) for job in range(3) for r in range(2)]
    assert [t[0]["state"] for t in taken] == ["0", "0", "1", "1", "2", "2"]
    assert len({t[2] for t in taken}) == 6  # each repeat its own key
    for repeat in range(2):
        with pytest.raises(InvalidRequest, match="state"):
            ahead.take(3, repeat)
    assert ahead.take(5, 1)[0]["state"] == "5"


def test_the_writer_commits_at_once_when_urged_rather_than_after_its_linger(tmp_path: Path) -> None:
    with Checkpoint(tmp_path / "answers.sqlite") as store:
        store.LINGER_SECONDS = 60.0  # a linger nobody waits out: only urge (or flush) commits
        done = store.put("k1", "/decisions", "m", "{}", "req_1", 1, 0, "http://gw/v1")
        with pytest.raises(TimeoutError):
            done.result(timeout=0.2)
        store.urge()
        done.result(timeout=30)
        assert store.written == 1
        later = store.put("k2", "/decisions", "m", "{}", "req_2", 1, 0, "http://gw/v1")
        store.flush()  # flush commits without waiting out the linger too
        assert later.done() and store.written == 2
