"""What a run produced: per distinct request and ask, arrays of answers and meta; and its rows as columns.

Answers are stored by request (a run's distinct requests times its repeats), not by row, and only
turned into one row per input row at the end, positionally, so duplicate index labels stay put.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import RunInterrupted
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation import repeats
from gwlab.frames.recipes import META_COLUMNS, RowRecipe
from gwlab.frames.run.parts import BatchSummary, CachedFrom, OverLimitReport, PilotEstimate, ReadByKey, SummaryPart
from gwlab.frames.run.status import LABELS, RowStatus
from gwlab.frames.templates import Rows

__all__ = ["CACHED", "ERROR", "NOT_RUN", "SENT", "Batch", "CachedFrom", "PilotEstimate", "ReadByKey", "RunInterrupted",
           "RunResult", "RunSummary", "first_rows", "recorded_where"]

NOT_RUN, SENT, CACHED, ERROR = RowStatus.NOT_RUN, RowStatus.SENT, RowStatus.CACHED, RowStatus.ERROR


class Batch:
    """The distinct requests of a run (numbered by first appearance) and the request of every row."""

    def __init__(self, rows: Rows) -> None:
        self.row_job = rows.codes  # per row: its request, -1 when the row failed before sending
        self.row_errors = rows.errors
        self.value = rows.value  # request number -> the row value its body is built from
        self.rows_per_job = np.bincount(rows.codes[rows.codes >= 0], minlength=len(rows))
        self._count = len(rows)

    @classmethod
    def of(cls, values: Sequence[Any], errors: Mapping[int, str] | None = None) -> Batch:
        return cls(Rows.of_values(values, errors))

    def __len__(self) -> int:
        return self._count


@dataclass
class RunSummary(ReadByKey):
    """What every run did, for the result's repr and `.attrs`. What one kind of run adds is a subclass
    built when that run ends: a cascade's (`frames/cascade/summary.py`), an extract run's (`frames/specs.py`)."""

    rows: int = 0
    requests: int = 0  # distinct requests (after dedupe), times repeats
    sent: int = 0  # requests sent in this run (with repeats: each repeat)
    cached: int = 0  # answers read from the checkpoint (with repeats: each repeat)
    # rows by their `__status`, the same on a first run and a re-run: a row is `sent` or `cached` (the first
    # row of its request), `duplicate` (a later row of the same request, sent or cached), `error` or `not_run`;
    # sent_rows + cached_rows + duplicate_rows + error_rows + not_run_rows == rows
    sent_rows: int = 0
    cached_rows: int = 0
    duplicate_rows: int = 0
    error_rows: int = 0  # every row whose `__status` is error: the invalid ones and the request errors
    invalid_rows: int = 0  # of those, rows never sent: their input failed before a request (NaN, blank, invalid)
    not_run_rows: int = 0
    # every answer paid for in this run (re-asks and answers that failed validation included; nothing for
    # cached rows): the client ledger's sum over this run's calls
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    elapsed: float = 0.0
    rate_limited: int = 0
    waited: float = 0.0
    stopped: str | None = None  # "budget" | "pilot" | "interrupted" | "error"
    pilot: PilotEstimate | None = None  # the estimate for the rows a pilot left out
    endpoint: str = ""
    model: str = ""
    gateway: str = ""  # the normalized base URL this run sent to, or the embedded gateway's identity (checkpoint key)
    cached_from: CachedFrom | None = None  # where and when the answers served from the checkpoint were given
    checkpoint: str | None = None  # the checkpoint file's path, None when answers were not kept
    # with pilot= or budget=: rows whose input looks over the model's max_input_tokens, found before sending
    over_limit: OverLimitReport | None = None
    reasked: int = 0  # re-asks of invalid answers sent in this run (each billed, in the tokens above): extract's
    run_id: str | None = None  # the run's record (`gwlab.runs()`, `gwlab.run_answers(run_id)`)
    recorded: str | None = None  # where the record is kept: the checkpoint, or this process only
    # with batch=: the jobs, counts, what they billed and whether rows are still pending (frames/batch/jobs.py)
    batch: BatchSummary | None = None

    def interrupted_text(self) -> str:
        """What an interrupt kept, and how to go on (the message of `RunInterrupted`)."""
        saved, missing = self.sent + self.cached, max(0, self.requests - self.sent - self.cached)
        if self.checkpoint is None:
            return (f"interrupted after {saved} of {self.requests} answers, but checkpoint=None kept none of "
                    "them: running the cell again sends every row again")
        return (f"interrupted: {saved} of {self.requests} answers are saved in the checkpoint {self.checkpoint} "
                f"({self.sent} received in this run); run the same cell again to resume: saved answers are not "
                f"sent again, only the {missing} missing ones are")

    @property
    def request_error_rows(self) -> int:
        """Rows whose request was sent and failed (what the ledger shows as errors)."""
        return self.error_rows - self.invalid_rows

    def text(self) -> str:
        cost = "n/a" if math.isnan(self.cost) else f"${self.cost:.4f}"
        parts = [f"{self.rows} rows", f"{self.sent_rows} sent", f"{self.cached_rows} cached",
                 f"{self.duplicate_rows} duplicate"]
        if self.invalid_rows:  # never sent: the ledger has no row for them, so they are not "errors" there
            parts.append(f"{self.invalid_rows} not sent (invalid input)")
        parts.append(f"{self.request_error_rows} request errors")
        if self.not_run_rows:
            parts.append(f"{self.not_run_rows} not run")
        if self.reasked:
            parts.append(f"{self.reasked} re-asked")
        if (self.sent, self.cached) != (self.sent_rows, self.cached_rows):  # repeats: asks, not rows
            parts.append(f"{self.sent} requests sent, {self.cached} answers from the checkpoint")
        line = (f"{self.model} {self.endpoint}: " + ", ".join(parts)
                + f" · {self.input_tokens} in / {self.output_tokens} out tokens · est. {cost}"
                + f" · {self.elapsed:.1f}s")
        if self.stopped:
            line += f" · stopped: {self.stopped}"
        line += "".join(f"\n{part.text()}" for part in self._parts(self.over_limit, self.cached_from))
        if self.run_id:
            line += f"\nrun {self.run_id}, recorded {recorded_where(self.recorded)}"
        line += "".join(f"\n{more}" for more in self.notes())
        line += "".join(f"\n{part.text()}" for part in self._parts(self.pilot, self.batch))
        return line

    @staticmethod
    def _parts(*parts: SummaryPart | None) -> list[SummaryPart]:
        """The parts that have something to say (an over-limit report of no rows says nothing)."""
        return [part for part in parts if part is not None and part.text()]

    def notes(self) -> list[str]:
        """What a kind of run adds to the summary's text (a subclass's; none for a plain run)."""
        return []


def recorded_where(recorded: str | None) -> str:
    """Where a run's record is, as the summary line says it (`gwlab.runs()` reads it)."""
    return recorded if recorded is not None and recorded.startswith("process only") else f"in {recorded}"


@dataclass
class RunResult:
    """Per distinct request and ask: status, tokens, request ID, error and the answer columns."""

    batch: Batch
    recipe: RowRecipe
    repeats: int
    status: np.ndarray  # (repeats, jobs) int8
    input_tokens: np.ndarray  # (repeats, jobs) float, NaN when unknown
    output_tokens: np.ndarray
    request_id: np.ndarray  # (repeats, jobs) object
    error: np.ndarray  # (repeats, jobs) object
    answers: dict[str, np.ndarray]  # column -> (repeats, jobs)
    key: np.ndarray  # (repeats, jobs) object: the checkpoint key each ask was taken with (None: not taken)
    summary: RunSummary = field(default_factory=RunSummary)
    failure: BaseException | None = None

    @classmethod
    def empty(cls, batch: Batch, recipe: RowRecipe, repeats: int) -> RunResult:
        """Nothing asked yet: every ask not run, every answer missing (NaN, or None for text and objects)."""
        k, jobs = repeats, len(batch)
        return cls(
            batch, recipe, k, np.zeros((k, jobs), np.int8), np.full((k, jobs), np.nan), np.full((k, jobs), np.nan),
            np.full((k, jobs), None, dtype=object), np.full((k, jobs), None, dtype=object),
            {name: np.full((k, jobs), None if dtype in ("str", "object") else np.nan,
                           dtype=object if dtype in ("str", "object") else np.float64)
             for name, dtype in recipe.columns.items()},
            np.full((k, jobs), None, dtype=object))

    def fill(self, repeat: int, job: int, record: Mapping[str, Any], tokens: tuple[int | None, int | None],
             request_id: str | None) -> None:
        """One ask's answer (a column its record lacks keeps its value), tokens and request id; not its status."""
        for name, values in self.answers.items():
            values[repeat, job] = record.get(name, values[repeat, job])
        tokens_in, tokens_out = tokens
        self.input_tokens[repeat, job] = np.nan if tokens_in is None else tokens_in
        self.output_tokens[repeat, job] = np.nan if tokens_out is None else tokens_out
        self.request_id[repeat, job] = request_id

    def frame(self, index: pd.Index) -> pd.DataFrame:
        """One row per input row, on `index`: the answer columns, then the meta columns."""
        row_job = self.batch.row_job
        ok_rows = row_job >= 0
        take = np.where(ok_rows, row_job, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN means: no successful ask
            per_job = self._combine(self.done())
        status = per_job.pop("__status")
        row_status = np.where(ok_rows, status[take] if len(status) else ERROR, ERROR)
        text = LABELS[row_status]
        # a later row of an answered request, whether sent now or read from the checkpoint: its count
        # must not change when the same frame is run again
        text[((row_status == SENT) | (row_status == CACHED)) & ~first_rows(row_job)] = RowStatus.DUPLICATE.label
        # one row per request, every row answered (the common large case): the job arrays are the columns
        identity = bool(ok_rows.all()) and len(per_job["__error"]) == len(row_job) and bool(
            (row_job == np.arange(len(row_job))).all())
        columns: dict[str, Any] = {}
        for name in list(per_job):
            values = per_job.pop(name)  # released column by column: the peak holds one extra, not all
            if identity:
                column = values
            elif len(values):
                column = values[take]
            else:
                column = np.full(len(row_job), None if values.dtype == object else np.nan, dtype=values.dtype)
            if not ok_rows.all():
                if column.dtype == object:
                    column = column.copy()
                    column[~ok_rows] = None
                else:
                    column = np.where(ok_rows, column, np.nan)
            if name == "__error" and self.batch.row_errors:
                column = column.copy()
                for position, message in self.batch.row_errors.items():
                    column[position] = message
            dtype = self.recipe.columns.get(name, META_COLUMNS.get(name, "float64"))
            columns[name] = _series(column, dtype, index)
        columns["__status"] = _series(text, "str", index)
        return pd.DataFrame(columns, index=index, copy=False)  # no copy into one consolidated block

    def repeats_frame(self, index: pd.Index) -> pd.DataFrame:
        """One row per (input row, repeat), on `index` plus a `repeat` level: each ask's own answer
        columns, its `__status` and `__request_id` (rows never sent: missing answers, status error)."""
        row_job, k = self.batch.row_job, self.repeats
        ok = np.repeat(row_job >= 0, k)
        jobs = np.repeat(np.where(row_job >= 0, row_job, 0), k)
        asks = np.tile(np.arange(k), len(row_job))
        long_index = _with_repeats(index, k)
        columns: dict[str, pd.Series] = {}
        for name, values in self.answers.items():
            column = values[asks, jobs] if values.shape[1] else np.full(len(asks), np.nan, dtype=values.dtype)
            missing: Any = None if column.dtype == object else np.nan
            column = np.where(ok, column, missing)
            columns[name] = _series(column, self.recipe.columns.get(name, "float64"), long_index)
        status = np.where(ok, self.status[asks, jobs] if self.status.shape[1] else ERROR, ERROR)
        ids: Any = self.request_id[asks, jobs] if self.request_id.shape[1] else None
        columns["__request_id"] = _series(np.where(ok, ids, np.array(None, dtype=object)), "str", long_index)
        columns["__status"] = _series(LABELS[status], "str", long_index)
        return pd.DataFrame(columns, index=long_index)

    def _combine(self, done: np.ndarray) -> dict[str, np.ndarray]:
        """Per job: answers of repeat 0 (or the mean over repeats), then spreads and meta."""
        out: dict[str, np.ndarray] = {}
        k = self.repeats
        for name, values in self.answers.items():
            if values.dtype == object:
                out[name] = _first_done(values, done)
            else:
                out[name] = np.nanmean(values, axis=0) if k > 1 else values[0]
        if k > 1:
            for name in self.recipe.columns:
                if tidy.question_of(name, tidy.CHOICE, tidy.LEVEL) is not None:  # the most likely of the mean
                    out[name] = _argmax_choice(name, out, self.recipe.columns, out[name])
            for name in self.recipe.spread:
                out[tidy.column(name, tidy.STD)] = np.nanstd(self.answers[name], axis=0, ddof=1)
            for name in self.recipe.decided:
                agreement = repeats.agreement(name, self.answers[name], done)
                out[tidy.column(repeats.stem(name), tidy.AGREEMENT)] = agreement
            out["__repeats"] = done.sum(axis=0).astype(float)
        any_done = done.any(axis=0)
        tokens_in = np.where(done, np.nan_to_num(self.input_tokens), 0).sum(axis=0)
        tokens_out = np.where(done, np.nan_to_num(self.output_tokens), 0).sum(axis=0)
        out["__input_tokens"] = np.where(any_done, tokens_in, np.nan)
        out["__output_tokens"] = np.where(any_done, tokens_out, np.nan)
        out["__request_id"] = _first_done(self.request_id, done)
        errors = self.error[0].copy()
        errors[any_done] = None
        out["__error"] = errors
        out["__status"] = self.job_status()
        return out

    def done(self) -> np.ndarray:
        """(repeats, jobs): which asks have an answer, sent in this run or read from the checkpoint."""
        done: np.ndarray = (self.status == SENT) | (self.status == CACHED)
        return done

    def job_status(self) -> np.ndarray:
        """Per request: SENT if any repeat was sent now, else CACHED if any was answered, else ERROR if
        any failed, else NOT_RUN (the status a row of that request shows)."""
        any_done = np.asarray(self.done().any(axis=0))
        status = np.full(len(any_done), NOT_RUN, dtype=np.int8)
        status[(self.status == ERROR).any(axis=0) & ~any_done] = ERROR
        status[any_done] = CACHED
        status[(self.status == SENT).any(axis=0)] = SENT
        return status


def first_rows(row_job: np.ndarray) -> np.ndarray:
    """Per row: whether it is the first row of its request (rows that failed before a request: False)."""
    first = np.zeros(len(row_job), dtype=bool)
    jobs, positions = np.unique(row_job, return_index=True)
    first[positions[jobs >= 0]] = True
    return first


def _with_repeats(index: pd.Index, k: int) -> pd.MultiIndex:
    """`index` with each label k times, and a `repeat` level numbering them 0..k-1."""
    rows = index.repeat(k)
    levels = [rows.get_level_values(i) for i in range(rows.nlevels)]
    names = [*rows.names] if rows.nlevels > 1 else [rows.name]
    return pd.MultiIndex.from_arrays([*levels, np.tile(np.arange(k), len(index))], names=[*names, repeats.REPEAT])


def _first_done(values: np.ndarray, done: np.ndarray) -> np.ndarray:
    first: np.ndarray = values[0].copy()
    for r in range(1, values.shape[0]):
        fill = ~done[:r].any(axis=0) & done[r]
        first[fill] = values[r][fill]
    return first


def _argmax_choice(name: str, out: dict[str, np.ndarray], columns: Mapping[str, str],
                   fallback: np.ndarray) -> np.ndarray:
    """With repeats, the choice (or a score's most likely level) is the one with the highest mean
    probability, not the mean of the answers."""
    question = tidy.question_of(name, tidy.CHOICE, tidy.LEVEL) or name
    options = [c for c in columns if c.startswith(tidy.probability_prefix(question))]
    if not options:
        return fallback
    probs = np.vstack([out[c] for c in options])
    labels = np.array([c.removeprefix(tidy.probability_prefix(question)) for c in options], dtype=object)
    if tidy.question_of(name, tidy.LEVEL) is not None:
        labels = labels.astype(float)
    best = labels[np.nan_to_num(probs, nan=-1.0).argmax(axis=0)]
    return np.where(np.isnan(probs).all(axis=0), fallback, best)


def _series(values: np.ndarray, dtype: str, index: pd.Index) -> pd.Series:
    if dtype == "Int64":  # straight from the float array: no Python int per row
        missing = np.isnan(values)
        return pd.Series(pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing),
                         index=index)
    if dtype == "str":
        try:
            return pd.Series(pd.array(values, dtype="str"), index=index)
        except (TypeError, ValueError):  # a gateway sent a non-string where a label belongs: keep its text
            cleaned = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values]
            return pd.Series(pd.array(cleaned, dtype="str"), index=index)
    if dtype == "object":
        return pd.Series(values.astype(object, copy=False), index=index, dtype=object, copy=False)
    return pd.Series(values.astype(dtype, copy=False), index=index, copy=False)
