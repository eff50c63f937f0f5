"""A durable store of the labels a person gives: one SQLite row per (question, row id), committed as each
label is given, so a kernel restart or a killed notebook loses none of them.

SQLite (standard library) in WAL mode with `synchronous=FULL`: a label is on disk when `put` returns, at
a person's pace the fsync costs nothing. Row ids and labels are kept as JSON, so an integer id comes back
an integer, a string a string and a MultiIndex tuple a tuple (its JSON list read back as one), and a
label keeps its type (`True`, `"refund"`, `3`). The store knows nothing of plans or estimates
(`labelling.py` does); several questions, and several frames whose row ids do not collide, may share one
file.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest

__all__ = ["LabelStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS labels (
    question TEXT NOT NULL,
    row_id TEXT NOT NULL,
    label TEXT NOT NULL,
    source TEXT NOT NULL,
    given_at REAL NOT NULL,
    PRIMARY KEY (question, row_id)
)
"""


def _plain(value: Any, field: str) -> Any:
    """A JSON-able form of a row id or label (numpy scalars as Python ones, tuples as lists)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, tuple):
        return [_plain(v, field) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(field, f"must be a finite value; got {value!r}")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    raise InvalidRequest(field, f"a string, a number, a bool or a tuple of them; got {type(value).__name__}")


def _encode(value: Any, field: str) -> str:
    return json.dumps(_plain(value, field), ensure_ascii=False, sort_keys=True)


def _decode(text: str) -> Any:
    value = json.loads(text)
    return tuple(value) if isinstance(value, list) else value


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str | tuple) and bool(pd.isna(value)))


class LabelStore:
    """Labels per (question, row id) in one SQLite file; each `put` is committed before it returns.

    >>> store = gwlab.LabelStore("labels.sqlite")            # doctest: +SKIP
    >>> store.put("refund", 17, "true")                      # doctest: +SKIP
    >>> df["label"] = store.column("refund", df.index)       # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the comm thread and the user's cell may both write
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)

    def __repr__(self) -> str:
        return f"LabelStore({str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def put(self, question: str, row: Hashable, label: Any, *, source: str = "person") -> None:
        """Record (or replace) the label of `row` for `question`; on disk when this returns."""
        self.put_many(question, [(row, label)], source=source)

    def put_many(self, question: str, pairs: Iterable[tuple[Hashable, Any]], *, source: str) -> int:
        """Record many (row id, label) pairs in one transaction; a missing label is skipped. Returns the count."""
        if not isinstance(question, str) or not question:
            raise InvalidRequest("question", "the question id the labels answer, a non-empty string")
        now = time.time()
        rows = [(question, _encode(row, "row"), _encode(label, "label"), source, now)
                for row, label in pairs if not _missing(label)]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return len(rows)

    def remove(self, question: str, row: Hashable) -> None:
        """Forget the label of `row` for `question` (a label given by mistake)."""
        with self._lock:
            self._db.execute("DELETE FROM labels WHERE question = ? AND row_id = ?", (question, _encode(row, "row")))

    def labels(self, question: str) -> pd.Series:
        """Every label stored for `question`, indexed by row id, oldest first."""
        with self._lock:
            found = self._db.execute("SELECT row_id, label FROM labels WHERE question = ? ORDER BY given_at, rowid",
                                     (question,)).fetchall()
        index = [_decode(r) for r, _ in found]
        values = [_decode(v) for _, v in found]
        name = f"{question} label"
        if index and all(isinstance(i, tuple) for i in index):
            return pd.Series(values, index=pd.MultiIndex.from_tuples(index), dtype=object, name=name)
        return pd.Series(values, index=pd.Index(index, dtype=object), dtype=object, name=name)

    def column(self, question: str, index: pd.Index) -> pd.Series:
        """The labels of `question` aligned to a frame's `index` (None where a row has none)."""
        with self._lock:
            lookup = dict(self._db.execute("SELECT row_id, label FROM labels WHERE question = ?", (question,)))
        found = (lookup.get(_encode(i, "row")) for i in index)  # matched as stored: encoded ids
        return pd.Series([None if text is None else _decode(text) for text in found], index=index, dtype=object,
                         name=question)

    def record_column(self, question: str, labels: pd.Series, *, source: str = "column") -> int:
        """Headless labelling: every non-missing value of `labels` (indexed by row id) into the store."""
        return self.put_many(question, labels.items(), source=source)

    def record_csv(self, question: str, path: str | os.PathLike[str], *, row: str = "id", label: str = "label") -> int:
        """Headless labelling from a CSV file with a row-id column and a label column. Labels are kept as
        the text written (as the widget writes them; the label reader reads "true", "Yes", "3"); ids are
        read by pandas: numbers as integers, so they match an integer index, text as text."""
        table = pd.read_csv(path, dtype={label: str}, keep_default_na=False, na_values=[""])
        for field, column in (("row", row), ("label", label)):
            if column not in table.columns:
                raise InvalidRequest(field, f"no column {column!r} in {path}; it has {list(table.columns)}")
        return self.put_many(question, zip(table[row], table[label], strict=True), source=f"csv:{Path(path).name}")
