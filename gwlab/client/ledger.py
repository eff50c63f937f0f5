"""The request ledger: one row per call, never a key, never an input (spec: response rule 5).

Rows are kept in memory and, when a path is given, in SQLite (standard library) so a notebook can
read yesterday's usage after a restart. `label_calls("name")` labels every call made inside it, across
threads of the sync facade and tasks of the async one, through a context variable.

`ending` says how each call's answer ended, in one vocabulary for chat, responses and messages,
streamed or not (gwlab/wire/endings.py; docs/guide/endings.md): `complete` (the model ended its
answer), `capped` (the caller's token cap), `filtered`, `refused`, `other` (a reason gwlab does not
know), `interrupted` (cut before the protocol's end), `stopped` (closed by the caller), `failed` (an
error). A call with no answer to cut (a listing, a decision) that succeeded is `complete`.
`complete` is kept for older code and follows from it: true only for the ending `complete`, so a
capped answer is `complete=False`, streamed or not. Rows saved before `ending` existed read NULL there.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import astuple, dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gwlab.client._ledger_columns import Columns
from gwlab.wire import endings
from gwlab.wire.families import read_usage

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CallRecord", "Ledger", "LedgerEntry", "RealtimeErrorEntry", "current_run", "label_calls", "settle_ending"]

_RUN: ContextVar[str | None] = ContextVar("gwlab_run", default=None)


@contextmanager
def label_calls(name: str) -> Iterator[str]:
    """Label every call made inside the block with `name` (the ledger's `run` column)."""
    token = _RUN.set(name)
    try:
        yield name
    finally:
        _RUN.reset(token)


def current_run() -> str | None:
    return _RUN.get()


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One call. `time` is Unix seconds at the start; `latency_s` runs to the last byte (streams too)."""

    time: float
    method: str
    path: str
    family: str
    model: str | None
    status: int | None
    request_id: str | None
    latency_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    retries: int = 0
    streamed: bool = False
    complete: bool | None = None
    error: str | None = None
    run: str | None = None
    ending: str | None = None  # last, so a SQLite file of an older version takes it as an added column


def settle_ending(ending: str | None, complete: bool | None,
                  error: BaseException | str | None) -> tuple[str | None, bool | None]:
    """The row's (ending, complete): `complete` follows from a given ending; a caller that only says
    `complete` (the realtime client) or only raised gets the ending those imply."""
    if ending is None:
        if error is not None:
            ending = endings.FAILED
        elif complete is not None:
            ending = endings.COMPLETE if complete else endings.INTERRUPTED
    return ending, endings.is_complete(ending) if ending is not None else complete


COLUMNS = tuple(f.name for f in fields(LedgerEntry))
# a row's values in column order: `astuple` deep-copies every field (~25 µs a call), this reads them
_VALUES = attrgetter(*COLUMNS)
# how each field is kept in memory (gwlab/client/_ledger_columns.py)
_KINDS = {"time": "float", "latency_s": "float", "status": "int", "input_tokens": "int", "output_tokens": "int",
          "retries": "int", "streamed": "bool", "complete": "bool", "request_id": "text"}
_INSERT = f"INSERT INTO calls VALUES ({', '.join('?' * len(COLUMNS))})"
_SQL_TYPES = {"time": "REAL", "latency_s": "REAL", "status": "INTEGER", "input_tokens": "INTEGER",
              "output_tokens": "INTEGER", "retries": "INTEGER", "streamed": "INTEGER", "complete": "INTEGER"}


@dataclass(frozen=True, slots=True)
class RealtimeErrorEntry:
    """A realtime `error` event, saved before anything is resent (spec: Errors, realtime rule).

    `related_event` is the client event it names, as JSON with long strings (audio, prompts) cut."""

    time: float
    model: str | None
    event_id: str | None
    type: str | None
    code: str | None
    message: str | None
    param: str | None
    related_event_id: str | None
    related_event: str | None
    run: str | None = None


_REALTIME_COLUMNS = tuple(f.name for f in fields(RealtimeErrorEntry))
_INSERT_REALTIME = f"INSERT INTO realtime_errors VALUES ({', '.join('?' * len(_REALTIME_COLUMNS))})"


class Ledger:
    """Every call of one gateway; thread-safe, since the sync facade records on its loop thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._rows = Columns(LedgerEntry, [(name, _KINDS.get(name, "label")) for name in COLUMNS])
        self._realtime_errors: list[RealtimeErrorEntry] = []
        self._lock = threading.Lock()
        self.path = os.fspath(path) if path is not None else None
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a ledger row is worth no fsync per call
            columns = ", ".join(f"{name} {_SQL_TYPES.get(name, 'TEXT')}" for name in COLUMNS)
            self._db.execute(f"CREATE TABLE IF NOT EXISTS calls ({columns})")
            self._add_missing_columns()
            self._db.execute(f"CREATE TABLE IF NOT EXISTS realtime_errors ({', '.join(_REALTIME_COLUMNS)})")

    def _add_missing_columns(self) -> None:
        """A file written by an older gwlab lacks newer columns (appended to LedgerEntry at its end)."""
        assert self._db is not None
        present = {row[1] for row in self._db.execute("PRAGMA table_info(calls)")}
        for name in COLUMNS:
            if name not in present:
                self._db.execute(f"ALTER TABLE calls ADD COLUMN {name} {_SQL_TYPES.get(name, 'TEXT')}")

    def add(self, entry: LedgerEntry) -> None:
        with self._lock:
            values = _VALUES(entry)
            self._rows.append(values)
            if self._db is not None:
                self._db.execute(_INSERT, values)

    def record(self, **values: Any) -> LedgerEntry:
        """Add a row from keyword values (unknown keys are refused, so nothing else slips in)."""
        entry = LedgerEntry(**values)
        self.add(entry)
        return entry

    def record_realtime_error(self, *, related_event: Any = None, **values: Any) -> RealtimeErrorEntry:
        """Save a realtime error event with the client event it names (a mapping, kept as JSON)."""
        related = json.dumps(related_event, default=str) if related_event is not None else None
        entry = RealtimeErrorEntry(time=time.time(), related_event=related, run=current_run(), **values)
        with self._lock:
            self._realtime_errors.append(entry)
            if self._db is not None:
                self._db.execute(_INSERT_REALTIME, astuple(entry))
        return entry

    def realtime_errors(self) -> list[RealtimeErrorEntry]:
        with self._lock:
            return list(self._realtime_errors)

    def entries(self) -> list[LedgerEntry]:
        """Rows of this session (the SQLite file may hold older ones: see `to_frame`)."""
        with self._lock:
            return self._rows.rows()

    def __len__(self) -> int:
        return len(self._rows)

    def to_frame(self) -> pd.DataFrame:
        """Every call as a DataFrame row; with a SQLite path, earlier sessions' rows too."""
        import pandas as pd  # pandas costs ~0.3 s to import: only when a frame is asked for

        with self._lock:
            if self._db is None:
                frame = pd.DataFrame(self._rows.to_dict())
                frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
                return frame
            rows = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM calls ORDER BY time").fetchall()
        frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
        frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
        for name in ("streamed", "complete"):
            frame[name] = frame[name].astype("boolean")
        for name in ("status", "input_tokens", "output_tokens", "retries"):
            frame[name] = frame[name].astype("Int64")
        return frame

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __repr__(self) -> str:
        where = f", path={self.path!r}" if self.path else ""
        return f"Ledger({len(self._rows)} calls{where})"


@dataclass(slots=True)
class CallRecord:
    """The ledger row of one call in the making: started when it is sent, recorded once when it ends."""

    method: str
    path: str
    family: str
    model: str | None
    streamed: bool
    started: float = field(default_factory=time.perf_counter)
    time: float = field(default_factory=time.time)
    run: str | None = field(default_factory=current_run)
    status: int | None = None
    request_id: str | None = None
    retries: int = 0
    recorded: bool = False

    def record(self, ledger: Ledger, *, usage: Any = None, complete: bool | None = None,
               error: BaseException | str | None = None, ending: str | None = None) -> None:
        """One ledger row; `complete` follows from `ending` (gwlab/wire/endings.py) when one is given.

        An error after a success status line arrived lost an answer that had begun (the body was cut):
        `interrupted`, as a cut stream is; any other error is `failed`."""
        if self.recorded:
            return
        self.recorded = True
        if ending is None and error is not None and self.status is not None and self.status < 400:
            ending = endings.INTERRUPTED
        ending, complete = settle_ending(ending, complete, error)
        tokens_in, tokens_out = _tokens(usage)
        ledger.record(time=self.time, method=self.method, path=self.path, family=self.family,
                      model=self.model, status=self.status, request_id=self.request_id,
                      latency_s=time.perf_counter() - self.started, input_tokens=tokens_in,
                      output_tokens=tokens_out, retries=self.retries, streamed=self.streamed,
                      complete=complete, run=self.run,
                      error=error if isinstance(error, str | None) else type(error).__name__, ending=ending)


_tokens = read_usage  # input and output tokens of a typed usage (any family) or a usage mapping
