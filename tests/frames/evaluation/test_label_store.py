"""The label store: a label is on disk when `put` returns (a process killed right after loses none),
ids and labels come back with their types, and headless labels (a column, a CSV) land in the same store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import gwlab
from gwlab.errors import InvalidRequest

ROOT = Path(__file__).resolve().parents[3]

KILLED_MID_SESSION = """
import os, signal, sys
import pandas as pd
import gwlab

frame = pd.DataFrame({"text": [f"message {i}" for i in range(40)], "refund": [(i % 3) / 2 for i in range(40)]},
                     index=pd.Index([f"m{i:02d}" for i in range(40)], name="id"))
plan = gwlab.label_plan(frame, "refund", budget=20, seed=1)
session = gwlab.LabelSession(frame, plan, {"refund": {"type": "noul", "instructions": "Refund?"}},
                             prob="refund", store=sys.argv[1])
given = []
for label in ["true", "false", "true"]:
    given.append(session.current)
    session.record(label)
print(",".join(given), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a kernel killed mid-session: no close, no exit handlers
"""


def test_labels_survive_a_killed_process_and_resume_where_it_stopped(tmp_path: Path) -> None:
    store = tmp_path / "labels.sqlite"
    done = subprocess.run([sys.executable, "-c", KILLED_MID_SESSION, str(store)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    given = done.stdout.strip().split(",")
    reopened = gwlab.LabelStore(store)
    labels = reopened.labels("refund")
    assert list(labels.index) == given and list(labels) == ["true", "false", "true"]


def test_ids_and_labels_come_back_with_their_types(tmp_path: Path) -> None:
    with gwlab.LabelStore(tmp_path / "s.sqlite") as store:
        store.put("q", 7, True)
        store.put("q", "m7", "refund")
        store.put("q", 8, 3)
        store.put("q", 7, False)  # replaced, not added
        store.put("other", 7, "x")  # another question in the same file
    again = gwlab.LabelStore(tmp_path / "s.sqlite")
    labels = again.labels("q")
    assert dict(labels.items()) == {7: False, "m7": "refund", 8: 3}
    assert type(labels[7]) is bool and type(labels[8]) is int
    assert list(again.column("q", pd.Index([8, 9, "m7"]))) == [3, None, "refund"]
    pairs = gwlab.LabelStore(tmp_path / "t.sqlite")
    pairs.put("q", ("a", 1), "true")
    assert pairs.labels("q").index[0] == ("a", 1)
    again.remove("q", 8)
    assert 8 not in again.labels("q").index


def test_headless_labels_from_a_column_and_a_csv_land_in_the_same_store(tmp_path: Path) -> None:
    store = gwlab.LabelStore(tmp_path / "s.sqlite")
    column = pd.Series(["true", None, "false"], index=[1, 2, 3])
    assert store.record_column("refund", column) == 2  # a missing label is not a label
    pd.DataFrame({"id": [3, 4], "label": ["true", "true"]}).to_csv(tmp_path / "more.csv", index=False)
    assert store.record_csv("refund", tmp_path / "more.csv") == 2
    assert dict(store.labels("refund").items()) == {1: "true", 3: "true", 4: "true"}


def test_bad_input_is_refused_naming_the_field(tmp_path: Path) -> None:
    store = gwlab.LabelStore(tmp_path / "s.sqlite")
    with pytest.raises(InvalidRequest, match=r"^row"):
        store.put("q", object(), "true")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match=r"^question"):
        store.put("", 1, "true")
    pd.DataFrame({"row": [1], "answer": ["x"]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InvalidRequest, match=r"^row"):
        store.record_csv("q", tmp_path / "bad.csv")
    assert store.labels("q").empty  # nothing half-written
