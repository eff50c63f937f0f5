"""Run records: what each `df.gw` run was, kept beside its answers, so a past run can be listed, read back
without sending anything, and compared with another (`gwlab.runs`, `gwlab.run_answers`).

A record is appended when the run ends to the checkpoint store's run table (SQLite `runs`, PostgreSQL
`gwlab_runs`) and never changed: running a cell again adds a new record whose answer keys are those of the
answers it reused. Its facts (one JSON text, what `runs` lists) say what was asked (family, model, gateway
identity, template, the recipe's parameters), what it cost (rows, tokens, cost, errors, duration) and how
it ended; its detail (another, read only by `run_answers`, so listing stays cheap) rebuilds the answer
frame exactly: per distinct request and repeat its checkpoint key, status and error, per row its request,
and the index labels. Never an API key or a password: the gateway is its checkpoint identity with any
password masked. With `checkpoint=None` the facts live in this process only (`gwlab.runs(False)`), and
their `kept` field says so.
"""

from __future__ import annotations

import json
import math
import secrets
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
from pandas.api.types import pandas_dtype

from gwlab.errors import InvalidRequest, RunRecordWarning
from gwlab.frames.extract import reading_fields, typed_columns
from gwlab.frames.grounding import columns as grounding
from gwlab.frames.recipes import RowRecipe, rebuild
from gwlab.frames.run.outcome import CACHED, ERROR, SENT, RunResult
from gwlab.frames.run.runner import Batch, Runner
from gwlab.frames.store.checkpoint import AnswerStore, canonical, is_store_url, key_of, mask_url
from gwlab.frames.store.stores import default_checkpoint_path, open_for_run
from gwlab.frames.task_batch import TaskRun, TaskSummary
from gwlab.frames.templates import Rows, json_value
from gwlab.wire.schema import AnswerInvalid, Schema

if TYPE_CHECKING:
    from gwlab.frames._client import RunLabel

__all__ = [
    "PROCESS_ONLY",
    "PROCESS_RUNS",
    "RUN_COLUMNS",
    "Derived",
    "Described",
    "RunLog",
    "record_derived",
    "record_rows",
    "record_tasks",
    "run_answers",
    "runs",
]

PROCESS_ONLY = "process only (checkpoint=None): gone when the process ends, answers not kept"
# the columns of `gwlab.runs()`, in order; a run's detail (answer keys, index) is stored beside, not listed
RUN_COLUMNS = ["run_id", "ledger_run", "started", "family", "model", "gateway", "endpoint", "template", "params",
               "rows", "repeats", "sent", "cached", "sent_rows", "cached_rows", "duplicate_rows", "error_rows",
               "invalid_rows", "not_run_rows", "input_tokens", "output_tokens", "cost", "duration", "status",
               "stopped", "checkpoint", "kept"]


@runtime_checkable
class RunLog(Protocol):
    """Where run records are appended: the checkpoint stores, and this process's list."""

    def add_run(self, run_id: str, started: str, record: str, detail: str | None) -> None:
        """Append a run: its listed facts (JSON) and what reads its answers back (JSON, None: not kept)."""
        ...

    def run_records(self) -> list[str]:
        """Every run's facts, oldest first (never the bulky detail)."""
        ...

    def run_detail(self, run_id: str) -> str | None:
        """One run's answer keys, statuses and index (JSON), None when it kept none."""
        ...


class ProcessRuns:
    """The records of runs that kept no checkpoint: in this process's memory only."""

    path = PROCESS_ONLY

    def __init__(self) -> None:
        self._records: list[str] = []

    def add_run(self, run_id: str, started: str, record: str, detail: str | None) -> None:
        self._records.append(record)  # no answers were kept: there is nothing to read back

    def run_records(self) -> list[str]:
        return list(self._records)

    def run_detail(self, run_id: str) -> str | None:
        return None


PROCESS_RUNS = ProcessRuns()


@dataclass(frozen=True)
class Described:
    """What the accessor knows of a run beyond the runner: the template as given, the rows' index, the prefix."""

    template: Mapping[str, Any]
    index: pd.Index
    prefix: str
    label: RunLabel | None = None  # the run's id and its calls' ledger label (None: a fresh id, no calls)
    derived: Mapping[str, Any] | None = None  # columns computed after the run (grounding: frames/grounding.py)


def record_rows(store: AnswerStore | None, runner: Runner, result: RunResult, described: Described) -> None:
    """Append the record of a finished (or stopped) row run; its id and where it is kept go on the summary."""
    facts = {"kind": "rows", **_facts(result.summary, runner, described)}
    _append(store, result.summary, facts, described.label, lambda: {"answers": _answers(runner, result),
                                                                    "index": _index_spec(described.index),
                                                                    **({"derived": described.derived}
                                                                       if described.derived else {})})


def record_tasks(store: AnswerStore | None, run: TaskRun, frame: pd.DataFrame, summary: TaskSummary,
                 described: Described) -> None:
    """Append the record of a task batch: its facts, its rows' checkpoint keys, and its task columns as they
    ended (a later run may update a task's checkpoint entry; this run's frame stays as it was)."""
    bodies = [b for b in run.bodies if b is not None]
    fixed = {k: v for k, v in (bodies[0] if bodies else {}).items() if all(b.get(k) == v for b in bodies)}
    url, space, qualifier = summary.gateway.partition(" ")
    facts = {"kind": "tasks", "family": summary.family, "model": summary.model,
             "gateway": mask_url(url) + space + qualifier, "endpoint": run.family.submit_path,
             "template": json_value(dict(described.template)), "params": json_value(fixed), "rows": summary.rows,
             "repeats": 1, "prefix": described.prefix, "sent": summary.submitted, "cached": summary.resumed,
             "sent_rows": summary.submitted, "cached_rows": summary.resumed,
             "duplicate_rows": 0, "error_rows": summary.error_rows, "invalid_rows": len(run.row_errors),
             "not_run_rows": summary.not_run_rows, "input_tokens": None, "output_tokens": None,
             "cost": None if math.isnan(summary.cost) else summary.cost, "duration": summary.elapsed,
             "status": "stopped" if summary.stopped else "finished", "stopped": summary.stopped,
             "checkpoint": summary.checkpoint}
    columns = {name: [json_value(v) for v in frame[name]] for name in frame.columns}
    dtypes = {name: str(frame[name].dtype) for name in frame.columns}
    _append(store, summary, facts, described.label,
            lambda: {"answers": {"keys": run.keys, "columns": columns, "dtypes": dtypes},
                     "index": _index_spec(described.index)})


@dataclass(frozen=True)
class Derived:
    """A run made from another's answers (a cascade from its cheap model's run): the base run's id, its
    columns renamed, the columns added (values on the base's index) and the facts that differ from its."""

    base: str
    renamed: Mapping[str, str]
    added: pd.DataFrame
    facts: Mapping[str, Any]


def record_derived(store: AnswerStore | None, summary: Any, derived: Derived, label: RunLabel | None) -> None:
    """Append the record of a derived run: the base run's listed facts with `derived.facts` over them, and a
    detail that rebuilds its frame from the base's answers (nothing sent again) plus the columns added."""
    log: Any = store if isinstance(store, RunLog) else PROCESS_RUNS
    base, _ = _find(log, derived.base)
    listed = {c: base.get(c) for c in RUN_COLUMNS if c not in ("run_id", "ledger_run", "started", "kept")}
    facts = {**listed, "prefix": base.get("prefix", ""), "kind": "derived", "base_run": derived.base,
             **derived.facts}
    added = derived.added
    _append(store, summary, facts, label, lambda: {
        "base": derived.base, "renamed": dict(derived.renamed),
        "columns": {str(c): [json_value(v) for v in added[c]] for c in added.columns},
        "dtypes": {str(c): str(added[c].dtype) for c in added.columns}})


def _append(store: AnswerStore | None, summary: Any, facts: dict[str, Any], label: RunLabel | None,
            detail: Callable[[], Any]) -> None:
    """Write one record (to the store when it keeps records, else to this process) and say where on `summary`;
    `detail` (answer keys and index) is made only when answers were kept. The record's id is the run's, the
    one its calls carry in the client ledger (`ledger_run`, unless the caller labelled them itself)."""
    now = time.time()
    run_id = label.run_id if label is not None else \
        f"{facts['family']}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}-{secrets.token_hex(4)}"
    facts = {**facts, "ledger_run": label.ledger if label is not None else None}
    log: Any = store if isinstance(store, RunLog) else PROCESS_RUNS
    kept = PROCESS_ONLY if store is None else str(store.path) if log is store else \
        "process only: this checkpoint store keeps no run records"
    record = {**facts, "run_id": run_id, "kept": kept, "started": _iso(now - summary.elapsed)}
    details = json.dumps(detail(), ensure_ascii=False, allow_nan=False) if log is store else None
    try:
        log.add_run(run_id, record["started"], json.dumps(record, ensure_ascii=False, allow_nan=False), details)
    except Exception as exc:  # a paid run is returned even when its record cannot be written
        warnings.warn(f"run {run_id} could not be recorded in {kept}: {type(exc).__name__}: {exc}; kept for "
                      "this process only", RunRecordWarning, stacklevel=4)
        kept = "process only: the store refused the record"
        PROCESS_RUNS.add_run(run_id, record["started"], json.dumps({**record, "kept": kept}), None)
    summary.run_id, summary.recorded = run_id, kept


def _facts(summary: Any, runner: Runner, described: Described) -> dict[str, Any]:
    """The listed facts of a run (every `RUN_COLUMNS` entry but id, time and where it is kept)."""
    url, space, qualifier = summary.gateway.partition(" ")
    cost = None if math.isnan(summary.cost) else summary.cost
    return {"family": runner.recipe.name, "model": summary.model, "gateway": mask_url(url) + space + qualifier,
            "endpoint": summary.endpoint, "template": json_value(dict(described.template)),
            "params": json_value(dict(runner.recipe.spec or {})), "rows": summary.rows, "repeats": runner.repeats,
            "prefix": described.prefix, "sent": summary.sent, "cached": summary.cached,
            "sent_rows": summary.sent_rows, "cached_rows": summary.cached_rows,
            "duplicate_rows": summary.duplicate_rows, "error_rows": summary.error_rows,
            "invalid_rows": summary.invalid_rows, "not_run_rows": summary.not_run_rows,
            "input_tokens": summary.input_tokens, "output_tokens": summary.output_tokens, "cost": cost,
            "duration": summary.elapsed, "status": "stopped" if summary.stopped else "finished",
            "stopped": summary.stopped, "checkpoint": summary.checkpoint}


def _answers(runner: Runner, result: RunResult) -> dict[str, Any]:
    """What rebuilds the answer frame: per request and repeat its key, status and failure; per row its request.
    The keys the run took its asks with are reused; only asks it never reached (a stop) are keyed here."""
    batch = result.batch
    keys: list[list[str | None]] = result.key.tolist()
    texts: dict[int, str | None] = {}
    for repeat, job in [(r, j) for r, row in enumerate(keys) for j, key in enumerate(row) if key is None]:
        if job not in texts:
            try:
                texts[job] = canonical(runner.recipe.body(batch.value(job)))
            except (InvalidRequest, ValueError, TypeError):  # failed before a request, as in the run
                texts[job] = None
        text = texts[job]
        keys[repeat][job] = None if text is None else key_of(runner.gateway, runner.recipe.endpoint, text, repeat)
    failures = [[int(r), int(j), result.error[r, j], result.request_id[r, j]]
                for r, j in zip(*np.nonzero(result.status == ERROR), strict=True)]
    return {"keys": keys, "status": result.status.tolist(), "failures": failures,
            "row_job": batch.row_job.tolist(), "row_errors": {str(p): m for p, m in batch.row_errors.items()}}


def _index_spec(index: pd.Index) -> dict[str, Any]:
    """The row labels as JSON, with each level's name and dtype, so the index is rebuilt as it was."""
    labels = [json_value(label) for label in index]
    dtypes = [str(index.get_level_values(i).dtype) for i in range(index.nlevels)]
    return {"names": json_value(list(index.names)), "labels": labels, "dtypes": dtypes}


def _index(spec: Mapping[str, Any]) -> pd.Index:
    names, labels, dtypes = spec["names"], spec["labels"], spec["dtypes"]
    if len(names) == 1:
        return _cast(pd.Index(labels, name=names[0], dtype=object), dtypes[0])
    levels = [_cast(pd.Index([label[i] for label in labels], dtype=object), dtypes[i]) for i in range(len(names))]
    return pd.MultiIndex.from_arrays(levels, names=names)


def _cast(index: pd.Index, dtype: str) -> pd.Index:
    try:
        return index.astype(dtype)
    except (TypeError, ValueError):  # a dtype JSON cannot hold exactly: the labels as JSON gave them
        return index.infer_objects()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


# --- reading ---------------------------------------------------------------------------------------------


def _open(checkpoint: Any) -> tuple[RunLog | None, bool]:
    """(run log, opened here) of `checkpoint`: None/"auto" the default store, False this process's runs.
    A file that does not exist holds no runs and is not created by reading."""
    if checkpoint is False:
        return PROCESS_RUNS, False
    spec = default_checkpoint_path() if checkpoint is None or checkpoint == "auto" else checkpoint
    if isinstance(spec, str | Path) and not is_store_url(spec) and not Path(spec).exists():
        return None, False
    store, owned = open_for_run(spec)
    if not isinstance(store, RunLog):
        raise InvalidRequest("checkpoint", f"{type(store).__name__} keeps no run records")
    return store, owned


def _records(checkpoint: Any) -> list[dict[str, Any]]:
    log, owned = _open(checkpoint)
    try:
        return [json.loads(text) for text in (log.run_records() if log is not None else [])]
    finally:
        if owned:
            log.close()  # type: ignore[union-attr]


def runs(checkpoint: Any = None) -> pd.DataFrame:
    """The run records of a checkpoint store as a DataFrame, one row per `df.gw` run, newest last.

    Parameters
    ----------
    checkpoint : path, URL, store, False or None
        None (or "auto"): the default store (``$GWLAB_CHECKPOINT`` or ``~/.cache/gwlab/frames.sqlite``);
        a path, ``postgresql://`` URL or store: that one; False: this process's runs made with
        ``checkpoint=None`` (kept in memory only).

    Returns
    -------
    DataFrame
        Columns ``run_id``, ``ledger_run`` (the ``run`` label of its calls in ``gw.usage``: the run id, or
        the caller's ``label_calls`` label), ``started`` (UTC), ``family``, ``model``, ``gateway``,
        ``endpoint``, ``template``, ``params``, ``rows``, ``repeats``, ``sent`` (requests), ``cached``
        (answers reused), ``sent_rows``, ``cached_rows``, duplicate, error and not-run row counts,
        ``input_tokens``, ``output_tokens`` and ``cost`` (every answer paid for, as the ledger counts
        them), ``duration`` (s), ``status`` (finished or stopped),
        ``stopped`` (why), ``checkpoint`` and ``kept`` (where the record lives).
    """
    frame = pd.DataFrame([{c: r.get(c) for c in RUN_COLUMNS} for r in _records(checkpoint)], columns=RUN_COLUMNS)
    frame["started"] = pd.to_datetime(frame["started"], utc=True)
    return frame


def run_answers(run_id: str, checkpoint: Any = None) -> pd.DataFrame:
    """A recorded run's answer columns again, on its original index, read from the store: nothing is sent.

    Parameters
    ----------
    run_id : str
        The run's id: ``result.run.run_id``, or the ``run_id`` column of `runs`.
    checkpoint : path, URL, store or None
        Where the run was recorded (default: the default store), as for `runs`.

    Returns
    -------
    DataFrame
        The answer and meta columns the run returned (with its prefix), as ``join=False`` gives them.
    """
    if not isinstance(run_id, str) or not run_id:
        raise InvalidRequest("run_id", f"a run id string (result.run.run_id); got {run_id!r}")
    log, owned = _open(checkpoint)
    try:
        return _answers_of(log, run_id)
    finally:
        if owned:
            log.close()  # type: ignore[union-attr]


def _answers_of(log: RunLog | None, run_id: str) -> pd.DataFrame:
    """A run's frame from `log`: a derived run's is its base run's, renamed, with the columns it added."""
    record, source = _find(log, run_id)
    detail = source.run_detail(run_id)
    if detail is None:
        raise InvalidRequest("run_id", f"run {run_id} is recorded {record['kept']}: its answers cannot be "
                                       "read back; run with a checkpoint to keep them")
    spec = json.loads(detail)
    if record.get("kind") != "derived":
        return _rebuild(record, spec, log)
    frame = _answers_of(log, spec["base"]).rename(columns=spec["renamed"])
    for name, values in _typed(spec["columns"], spec["dtypes"]).items():
        frame[name] = values.set_axis(frame.index)  # the same rows, in order: the dtype kept
    return frame


def _find(log: RunLog | None, run_id: str) -> tuple[dict[str, Any], RunLog]:
    """The run's facts and the log holding them: the store's, else this process's."""
    for source in [s for s in (log, PROCESS_RUNS) if s is not None]:
        for text in source.run_records():
            record = json.loads(text)
            if record["run_id"] == run_id:
                return record, source
    where = getattr(log, "path", None) or "the default checkpoint store (no file yet)"
    raise InvalidRequest("run_id", f"no run {run_id!r} in {where} nor among this process's runs")


def _rebuild(record: Mapping[str, Any], detail: Mapping[str, Any], store: Any) -> pd.DataFrame:
    """The run's answer frame from its detail (keys, statuses, index) and the answers in `store`."""
    stored, index = detail["answers"], _index(detail["index"])
    if record.get("kind") == "tasks":
        return _task_frame(record, stored, index)
    schema = _schema(record)
    recipe = rebuild(record["family"], record["model"], record["params"])
    recipe = recipe if schema is None else reading_fields(recipe, schema)
    status = np.array(stored["status"], dtype=np.int8).reshape(record["repeats"], -1)
    keys = stored["keys"]
    done = [(r, j) for r, j in zip(*np.nonzero((status == SENT) | (status == CACHED)), strict=True)]
    failed = [(r, j) for r, j, _, _ in stored["failures"] if keys[r][j] is not None]
    entries = store.get_many({keys[r][j] for r, j in done + failed})  # a failed row's invalid answer too
    lost = sum(keys[r][j] not in entries for r, j in done)
    if lost:
        raise InvalidRequest("run_id", f"{lost} answers of run {record['run_id']} are no longer in the store")
    row_job = np.array(stored["row_job"], dtype=np.int64)
    rows = Rows(row_job, np.zeros(status.shape[1], dtype=np.int64), lambda job: None,
                {int(p): m for p, m in stored["row_errors"].items()})
    result = RunResult.empty(Batch(rows), recipe, record["repeats"])
    result.status[:] = status
    for r, j in done + [(r, j) for r, j in failed if keys[r][j] in entries]:
        entry = entries[keys[r][j]]
        result.fill(int(r), int(j), _read(recipe, entry.data()), (entry.input_tokens, entry.output_tokens),
                    entry.request_id)
    for r, j, error, request_id in stored["failures"]:
        result.error[r, j], result.request_id[r, j] = error, request_id
    frame = result.frame(index)
    frame = frame if schema is None else typed_columns(frame, schema)
    if detail.get("derived"):
        frame = grounding.restore(frame, detail["derived"])
    if record["prefix"]:
        frame.columns = [f"{record['prefix']}{c}" for c in frame.columns]
    return frame


def _schema(record: Mapping[str, Any]) -> Schema | None:
    """The schema of a recorded `df.gw.extract` run (its template keeps it), else None."""
    template = record.get("template") or {}
    return Schema.of(template["schema"]) if isinstance(template, Mapping) and "schema" in template else None


def _read(recipe: RowRecipe, data: Any) -> dict[str, Any]:
    """A stored answer's columns; an answer the run found invalid keeps what it had (its raw text)."""
    try:
        return recipe.record(data)
    except AnswerInvalid as exc:
        return exc.record


def _task_frame(record: Mapping[str, Any], stored: Mapping[str, Any], index: pd.Index) -> pd.DataFrame:
    """A task batch's columns as that run ended, with their dtypes, on its index."""
    frame = pd.DataFrame(_typed(stored["columns"], stored["dtypes"]))
    frame.index = index
    if record["prefix"]:
        frame.columns = [f"{record['prefix']}{c}" for c in frame.columns]
    return frame


def _typed(columns: Mapping[str, list[Any]], dtypes: Mapping[str, str]) -> dict[str, pd.Series]:
    """Recorded columns (JSON values) with their dtypes again."""
    out = {}
    for name, values in columns.items():
        dtype, series = pandas_dtype(dtypes[name]), pd.Series(values, dtype=object)  # what astype(str) resolves
        out[name] = pd.to_datetime(series, utc=True).astype(dtype) if dtypes[name].startswith("datetime") \
            else series.astype(dtype)
    return out
