"""Task batches: one asynchronous task per row (`df.gw.videos`, `df.gw.images`, `df.gw.tasks`), paid for once.

A run submits a task for every row that has none yet (under the run's concurrency, rate limit and
budget), polls every open task with one interval until each is terminal or the overall timeout
passes, downloads each completed result into a folder, and returns a frame aligned on the input's
index: task id, status, error, file, thumbnail and timings per row.

Exactly once, across kernels. Each row has a checkpoint entry (the answers checkpoint, keyed by the
gateway, the family, the row's index label and its submission body). Before a submission is sent its
entry is committed with no task id ("in doubt"); the moment the submission is answered, the task id is
committed. So whatever kills a kernel, a re-run finds every row in one of three states: a task id
(polled, never resubmitted), in doubt (the submission may have been accepted: the family's listing is
searched for it, and only a row whose task is not found is submitted again; a family without a
listing reports the row instead), or nothing (submitted). Commits are synchronous: SQLite's WAL keeps
them through a SIGKILL.

Why one task per row, not per distinct prompt as `df.gw.decide` dedupes requests: a generated image or
clip is a sample, and an analyst with two rows asking the same thing expects two results. Why not the
request runner (`frames/run/runner.py`): it dedupes, and it checkpoints an answer after it arrives; a task
needs a per-row key, a mark committed before the submission leaves, and a poll phase after it. The
options (concurrency, limiter, `Budget`, pilot, checkpoint file, errors) mean what they mean there.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import html
import io
import itertools
import json
import math
import mimetypes
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gwlab.errors import GatewayError, InvalidRequest, NotFound, RateLimited
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.lifecycle import Progress, Stoppable, drive
from gwlab.frames.run.limiter import Limiter, TokenBucket
from gwlab.frames.run.outcome import ReadByKey, recorded_where
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.run.status import RowStatus
from gwlab.frames.run.usage import PriceTable
from gwlab.frames.store.checkpoint import AnswerStore, canonical, gateway_id, key_of
from gwlab.wire.jobs.tasks import Task, TaskFamily

if TYPE_CHECKING:
    from pandas.api.typing import NaTType

__all__ = ["TaskFrame", "TaskPilotEstimate", "TaskRun", "TaskSummary", "task_prices"]

COLUMNS = ("task_id", "status", "error", "file", "thumbnail", "submitted_at", "finished_at", "seconds")
# row statuses besides the task's own: the same words as every run's (frames/run/status.py)
IN_DOUBT, NOT_RUN, ERROR = RowStatus.IN_DOUBT.label, RowStatus.NOT_RUN.label, RowStatus.ERROR.label


@dataclass(frozen=True, slots=True)
class TaskPilotEstimate(ReadByKey):
    """`.run.pilot` of a task batch: what the tasks a pilot left out would cost, and the seconds they would
    take one after another (the pilot's own tasks' mean; NaN until one finished)."""

    tasks: int
    cost: float
    seconds: float = math.nan

    def text(self) -> str:
        rest = "n/a" if math.isnan(self.cost) else f"${self.cost:.4f}"
        return (f"pilot: the other {self.tasks} tasks would cost about {rest} and take about "
                f"{self.seconds:.0f} s one after another")


@dataclass
class TaskSummary:
    """What a task run did: rows, tasks submitted and found, files, spending, and how it ended."""

    rows: int = 0
    submitted: int = 0  # billable submissions answered in this run
    resumed: int = 0  # rows whose task id came from the checkpoint (polled, not resubmitted)
    found: int = 0  # in-doubt submissions found by a lookup instead of being resent
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0  # still queued or in progress when the run stopped waiting
    error_rows: int = 0
    not_run_rows: int = 0
    files: int = 0
    cost: float = 0.0  # of the tasks submitted in this run, with `prices`
    elapsed: float = 0.0
    stopped: str | None = None  # "budget" | "pilot" | "timeout" | "error" | "interrupted"
    pilot: TaskPilotEstimate | None = None  # what the rows a pilot left out would cost
    family: str = ""
    model: str = ""
    gateway: str = ""
    folder: str = ""
    checkpoint: str | None = None
    run_id: str | None = None  # the run's record (`gwlab.runs()`, `gwlab.run_answers(run_id)`)
    recorded: str | None = None  # where the record is kept: the checkpoint, or this process only

    def interrupted_text(self) -> str:
        """What an interrupt kept, and how to go on (the message of `RunInterrupted`)."""
        kept = self.submitted + self.resumed + self.found
        if self.checkpoint is None:
            return (f"interrupted after {kept} of {self.rows} tasks were submitted, but checkpoint=None kept no "
                    "task id: running the cell again submits (and pays for) every row again")
        return (f"interrupted: {kept} of {self.rows} rows have a task, whose ids are saved in the checkpoint "
                f"{self.checkpoint} ({self.submitted} submitted in this run); run the same cell again to go on: "
                "those tasks are polled, never resubmitted, and only rows without one are submitted")

    def text(self) -> str:
        cost = "n/a" if math.isnan(self.cost) else f"${self.cost:.4f}"
        parts = [f"{self.rows} rows", f"{self.submitted} submitted", f"{self.resumed} resumed",
                 f"{self.completed} completed", f"{self.failed} failed"]
        parts += [f"{n} {name}" for n, name in ((self.found, "found by lookup"), (self.cancelled, "cancelled"),
                                                (self.running, "still running"), (self.error_rows, "errors"),
                                                (self.not_run_rows, "not run")) if n]
        line = f"{self.family} {self.model}: " + ", ".join(parts) + f"; cost {cost}; {self.elapsed:.1f} s"
        if self.stopped:
            line += f"; stopped: {self.stopped}"
        if self.pilot:
            line += f"\n{self.pilot.text()}"
        if self.running:
            line += "\nrun the same cell again to keep waiting: open tasks are polled, never resubmitted"
        if self.run_id:
            line += f"\nrun {self.run_id}, recorded {recorded_where(self.recorded)}"
        return line


class TaskFrame(BatchFrame):
    """The result of a task batch: a `BatchFrame` whose `run` is a `TaskSummary` and whose notebook repr
    draws each row's thumbnail."""

    run: TaskSummary  # type: ignore[assignment]  # the same protocol: a dataclass with text()

    @classmethod
    def of(cls, frame: pd.DataFrame, summary: TaskSummary) -> TaskFrame:
        """`BatchFrame.wrap` for a task batch's summary (no repeats)."""
        out = cls(frame)
        out.run = summary
        out.attrs["gwlab_run"] = asdict(summary)
        return out
    _THUMB_PX = 96
    _THUMB_ROWS = 50

    def _repr_html_(self) -> str | None:
        """The run's summary, then the first rows with each thumbnail drawn (files stay on disk)."""
        summary = getattr(self, "run", None)
        head = pd.DataFrame(self).head(self._THUMB_ROWS)
        shown = head.map(lambda v: html.escape(str(v)))
        for column in [c for c in head.columns if str(c).endswith("thumbnail")]:
            shown[column] = [_img_tag(p, self._THUMB_PX) for p in head[column]]
        table = shown.to_html(escape=False)
        more = f"<div>{len(self) - len(head)} more rows</div>" if len(self) > len(head) else ""
        lines = html.escape(summary.text()).replace("\n", "<br>") if summary is not None else ""
        return f"<div style='font-family:monospace;font-size:90%;margin:4px 0'>{lines}</div>{table}{more}"


def _img_tag(path: Any, px: int) -> str:
    """An inline thumbnail of an image file (a data URI, so the notebook keeps it), or '' without one."""
    if not isinstance(path, str) or not path or not os.path.exists(path):
        return ""
    try:
        from PIL import Image  # optional: without Pillow the path is shown instead

        with Image.open(path) as image:
            image.thumbnail((px, px))
            out = io.BytesIO()
            image.convert("RGB").save(out, format="PNG")
    except Exception:
        return html.escape(path)
    data = base64.b64encode(out.getvalue()).decode()
    return f"<img src='data:image/png;base64,{data}' alt='{html.escape(Path(path).name)}'>"


def task_prices(prices: Mapping[str, float] | None, model: str) -> float:
    """Dollars per task of `model` from `{model or glob: dollars per task}`; NaN when not listed, 0 for
    local models when no table is given (the preview renderers cost nothing)."""
    if prices is None:
        return 0.0 if model.startswith("local/") else math.nan
    if model in prices:
        return float(prices[model])
    for pattern in sorted(prices, key=len, reverse=True):
        if fnmatch.fnmatchcase(model, pattern):
            return float(prices[pattern])
    return math.nan


@dataclass
class _Row:
    key: str
    body: dict[str, Any] | None
    task_id: str | None = None
    status: str | None = None
    error: str | None = None
    file: str | None = None
    thumbnail: str | None = None
    submitted_at: float | None = None
    finished_at: float | None = None
    in_doubt: bool = False  # the checkpoint holds a submission with no answer
    done: bool = False  # terminal and, if completed, downloaded

    def record(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "status": self.status, "error": self.error, "file": self.file,
                "thumbnail": self.thumbnail, "submitted_at": self.submitted_at, "finished_at": self.finished_at,
                "done": self.done}


@dataclass
class TaskRun(Stoppable):
    """One batch of tasks: built by the accessor, `await run()` once."""

    client: Any  # gwlab.client.tasks.AsyncTasks
    family: TaskFamily
    model: str
    index: pd.Index
    bodies: Sequence[dict[str, Any] | None]  # per row; None: the row failed before sending (`row_errors`)
    row_errors: Mapping[int, str] = field(default_factory=dict)
    config: RunConfig = field(default_factory=lambda: RunConfig(kind="tasks"))
    origin: str = ""
    checkpoint: AnswerStore | None = None  # the store opened for `config.store.checkpoint`
    failure: BaseException | None = field(default=None, init=False)
    _stopping: str | None = field(default=None, init=False)
    _limited: str | None = field(default=None, init=False)  # "budget" or "pilot": rows left out before sending
    keys: list[str] = field(default_factory=list, init=False)  # per row, its checkpoint key (the run record's)

    def __post_init__(self) -> None:
        config = self.config  # checked when it was made: these are plain reads
        limits, spending, polling = config.limits, config.spending, config.polling
        assert limits.concurrency is not None  # RunConfig fills in the kind's default
        self.concurrency, self.pilot, self.refresh = limits.concurrency, spending.pilot, config.store.refresh
        self.errors, self.progress = config.failures.errors, config.output.progress
        self.poll_interval, self.timeout = polling.poll_interval, polling.timeout
        self.budget, self.prices = spending.budget, spending.prices
        self.folder = Path(polling.folder or Path("gwlab-tasks") / self.family.name)
        self.limiter: Limiter = limits.limiter or TokenBucket(limits.requests_per_minute)
        self.price = task_prices(self.prices, self.model)
        self.gateway = gateway_id(self.origin) if self.origin else ""

    # --- the run -----------------------------------------------------------------------------------

    async def run(self) -> tuple[pd.DataFrame, TaskSummary]:
        started = time.perf_counter()
        rows = self._rows()
        self.keys = [r.key for r in rows]
        summary = TaskSummary(rows=len(rows), family=self.family.name, model=self.model, gateway=self.gateway,
                              folder=str(self.folder),
                              checkpoint=str(self.checkpoint.path) if self.checkpoint is not None else None)
        claimed = {r.task_id for r in rows if r.task_id}
        summary.resumed = len(claimed)
        to_submit = [i for i, r in enumerate(rows) if r.body is not None and r.task_id is None and not r.error]
        allowed = self._admitted(to_submit, summary)
        counts = {"submitted": summary.resumed, "finished": 0}
        bar = Progress(self.progress, len(rows), f"{self.family.name} {self.model}")
        for r in rows:
            if r.done or r.body is None:
                counts["finished"] += 1
        bar.reach(counts["finished"], submitted=counts["submitted"], running=self._open(rows))
        deadline = time.monotonic() + self.timeout
        gate = asyncio.Semaphore(self.concurrency)
        queue = iter(allowed)
        workers_count = min(self.concurrency, len(allowed))
        submitting = {"workers": workers_count}  # counted before they start, so the poller waits for them

        async def submitter() -> None:
            try:
                for i in queue:
                    if self._stopping:
                        return
                    async with gate:
                        await self._submit(rows[i], claimed, summary)
                    counts["submitted" if rows[i].task_id else "finished"] += 1
                    bar.reach(counts["finished"], submitted=counts["submitted"], running=self._open(rows))
            finally:
                submitting["workers"] -= 1

        async def poller() -> None:
            while True:
                if self._stopping in ("error", "interrupted"):  # the ids are kept: a re-run polls them
                    return
                open_rows = [r for r in rows if r.task_id and not r.done]
                if not open_rows and submitting["workers"] == 0:
                    return
                if time.monotonic() >= deadline:
                    self._stopping = self._stopping or "timeout"
                    return
                results = await asyncio.gather(*(self._poll(r, gate) for r in open_rows), return_exceptions=True)
                for r, outcome in zip(open_rows, results, strict=True):
                    if isinstance(outcome, asyncio.CancelledError):
                        raise outcome
                    if isinstance(outcome, BaseException):
                        r.error = f"{type(outcome).__name__}: {outcome}"
                    if r.done:
                        counts["finished"] += 1
                bar.reach(counts["finished"], submitted=counts["submitted"], running=self._open(rows))
                if [r for r in rows if r.task_id and not r.done] or submitting["workers"]:
                    await asyncio.sleep(min(self.poll_interval, max(0.0, deadline - time.monotonic())))

        await drive([*(submitter() for _ in range(workers_count)), poller()], self.checkpoint, bar)
        summary.stopped = self._stopping or self._limited
        self._tally(rows, summary)
        summary.cost = summary.submitted * self.price if summary.submitted else 0.0
        if summary.pilot is not None:  # scaled from the pilot's own tasks, as if run one after another
            durations = [r.finished_at - r.submitted_at for r in rows
                         if r.done and r.finished_at and r.submitted_at]
            mean = sum(durations) / len(durations) if durations else math.nan
            summary.pilot = replace(summary.pilot, seconds=mean * summary.pilot.tasks)
        summary.elapsed = time.perf_counter() - started
        return self._frame(rows), summary

    def _rows(self) -> list[_Row]:
        """Every row with its checkpoint entry (task id, in doubt, or nothing) read back."""
        endpoint = f"tasks:{self.family.name}{self.family.submit_path}"
        rows: list[_Row] = []
        for position, body in enumerate(self.bodies):
            label = self.index[position]
            label = list(label) if isinstance(label, tuple) else label
            text = canonical(body) if body is not None else ""
            key = key_of(self.gateway, f"{endpoint}#row={json.dumps(label, default=str)}", text)
            row = _Row(key, body, error=self.row_errors.get(position))
            if body is None:
                row.status = ERROR
            rows.append(row)
        if self.checkpoint is not None and not self.refresh:
            stored = self.checkpoint.get_many(r.key for r in rows if r.body is not None)
            for row in rows:
                entry = stored.get(row.key)
                if entry is None:
                    continue
                saved = entry.data()
                if saved.get("task_id") is None:  # sent with no answer kept (in doubt), or refused (fresh)
                    row.in_doubt = saved.get("submitted_at") is not None
                    row.submitted_at = saved.get("submitted_at")
                    continue
                row.task_id, row.submitted_at = saved["task_id"], saved.get("submitted_at")
                row.status, row.error = saved.get("status"), saved.get("error")
                row.file, row.thumbnail = saved.get("file"), saved.get("thumbnail")
                row.finished_at = saved.get("finished_at")
                # a finished row is done only while its file is still there: else it is downloaded again
                row.done = bool(saved.get("done")) and (row.file is None or os.path.exists(row.file))
        return rows

    def _admitted(self, to_submit: list[int], summary: TaskSummary) -> list[int]:
        """The rows this run may submit: within the pilot and the budget, estimated before spending."""
        allowed = to_submit
        if self.pilot is not None:
            allowed = [i for i in to_submit if i < self.pilot]
        limit = self._budget_tasks()
        if limit is not None and len(allowed) > limit:
            allowed = allowed[:limit]
            self._limited = "budget"
        if self.pilot is not None and len(allowed) < len(to_submit):
            self._limited = self._limited or "pilot"
            left = len(to_submit) - len(allowed)
            summary.pilot = TaskPilotEstimate(left, left * self.price)
        return allowed

    def _budget_tasks(self) -> int | None:
        """How many new tasks the budget allows (None: no budget)."""
        budget: object = self.budget  # checked here: a Budget or a whole number
        if budget is None:
            return None
        if isinstance(budget, Budget):
            if budget.cost is None:
                raise InvalidRequest("budget", "a task batch's Budget needs cost= (dollars) and prices= "
                                               "(dollars per task), or pass a whole number of tasks")
            table = budget.prices if budget.prices is not None else self.prices
            if isinstance(table, PriceTable):
                raise InvalidRequest("budget.prices", "dollars per task, {model or glob: dollars}; a PriceTable "
                                                      "prices tokens")
            price = task_prices(table, self.model)
            if math.isnan(price):
                raise InvalidRequest("prices", f"no price per task for {self.model!r}: a cost budget cannot be "
                                               "checked before spending")
            return int(budget.cost // price) if price > 0 else None
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise InvalidRequest("budget", f"a whole number of tasks, or Budget(cost=..., prices=...); "
                                           f"got {budget!r}")
        return budget

    async def _submit(self, row: _Row, claimed: set[str], summary: TaskSummary) -> None:
        assert row.body is not None
        if row.in_doubt:  # a submission was sent and its answer never reached the checkpoint
            try:
                found = await self.client.look_up(row.body, since=row.submitted_at or 0.0, exclude=claimed)
            except Exception as exc:
                self._fail(row, exc, status=IN_DOUBT)
                return
            if found is not None:
                summary.found += 1
                self._claim(row, found, claimed)
                return
        row.submitted_at = time.time()
        self._save(row)  # committed before the submission leaves: a kill after it leaves the row in doubt
        for attempt in itertools.count():
            try:
                await self.limiter.acquire(0)
                task = await self.client.submit(row.body, exclude=claimed)
                break
            except RateLimited as exc:  # refused, so not accepted: safe to send again after the policy's wait
                wait = self.client.retry.refusal_delay(exc, attempt)
                if wait is None:
                    self._fail(row, exc)
                    return
                self.limiter.pause(wait)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # InvalidRequest and other refusals: nothing was created; a loss the client's lookup could
                # not settle stays in doubt in the checkpoint, so a re-run looks it up again
                self._fail(row, exc, status=IN_DOUBT if _may_be_accepted(exc) else ERROR)
                if not _may_be_accepted(exc):
                    self._forget(row)
                return
        summary.submitted += 1
        self._claim(row, task, claimed)

    def _claim(self, row: _Row, task: Task, claimed: set[str]) -> None:
        if not task.id:
            self._fail(row, GatewayError("the gateway answered the submission without a task id"), status=IN_DOUBT)
            return
        claimed.add(task.id)
        row.task_id, row.status, row.in_doubt, row.error = task.id, task.status, False, None
        self._save(row)

    async def _poll(self, row: _Row, gate: asyncio.Semaphore) -> None:
        """Read an open task; once terminal, download a completed one's files. A task or file the gateway
        no longer has (404) ends the row as an error: polling it until the timeout would change nothing."""
        try:
            await self._poll_once(row, gate)
        except NotFound as exc:
            row.status, row.error, row.done = ERROR, f"{type(exc).__name__}: {exc}", True
            self._save(row)

    async def _poll_once(self, row: _Row, gate: asyncio.Semaphore) -> None:
        assert row.task_id is not None
        async with gate:
            if row.status is None or self.family.state(row.status) not in ("completed", "failed", "cancelled") \
                    or row.finished_at is None:
                task = await self.client.get(row.task_id)
                row.status = task.status
                if not task.is_terminal:
                    return
                row.finished_at = time.time()
                row.error = task.error_message if not task.is_completed else None
            if self.family.state(row.status) == "completed" and self.family.content_path is not None:
                row.file = await self._download(row.task_id, None)
                if self.family.thumbnail_variant is not None:
                    row.thumbnail = await self._download(row.task_id, self.family.thumbnail_variant)
                elif row.file and row.file.endswith((".png", ".jpg", ".jpeg", ".webp", ".gif")):
                    row.thumbnail = row.file
            row.done = True
            self._save(row)

    async def _download(self, task_id: str, variant: str | None) -> str:
        data = await self.client.download(task_id, variant)
        media_type = getattr(data, "media_type", "")
        if isinstance(data, str):
            data, media_type = data.encode(), media_type or "text/plain"
        elif not isinstance(data, bytes):
            data, media_type = json.dumps(data).encode(), "application/json"
        extension = mimetypes.guess_extension(media_type or "") or ".bin"
        suffix = f".{variant}" if variant else ""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{_safe(task_id)}{suffix}{extension}"
        partial = path.with_name(path.name + ".part")
        partial.write_bytes(data)
        os.replace(partial, path)  # a file that exists is a whole file
        return str(path)

    def _fail(self, row: _Row, exc: BaseException, *, status: str = ERROR) -> None:
        row.status, row.error = status, f"{type(exc).__name__}: {exc}"
        if self.errors == "raise" and self.failure is None:
            self.failure = exc
            self.stop("error")

    def _save(self, row: _Row) -> None:
        """Commit the row's entry now (not on the loop's next turn): it must survive a kill at any await."""
        if self.checkpoint is None:
            return
        self.checkpoint.put(row.key, f"tasks:{self.family.name}", self.model, json.dumps(row.record()), None,
                            None, None, self.gateway)
        self.checkpoint.flush()

    def _forget(self, row: _Row) -> None:
        """A refused submission created nothing: its in-doubt entry is dropped, so a re-run submits it."""
        if self.checkpoint is None:
            return
        self.checkpoint.put(row.key, f"tasks:{self.family.name}", self.model,
                            json.dumps({**row.record(), "submitted_at": None, "refused": True}), None, None, None,
                            self.gateway)
        self.checkpoint.flush()

    @staticmethod
    def _open(rows: list[_Row]) -> int:
        return sum(1 for r in rows if r.task_id and not r.done)

    def _tally(self, rows: list[_Row], summary: TaskSummary) -> None:
        for r in rows:
            state = self.family.state(r.status) if r.task_id else None
            if r.task_id is None and r.status is None:
                r.status = NOT_RUN
            if r.status == ERROR:
                summary.error_rows += 1
            elif state in ("completed", "failed", "cancelled") and r.done:
                setattr(summary, state, getattr(summary, state) + 1)
            elif r.task_id:
                summary.running += 1
            elif r.status == NOT_RUN:
                summary.not_run_rows += 1
            else:
                summary.error_rows += 1
            summary.files += r.file is not None

    def _frame(self, rows: list[_Row]) -> pd.DataFrame:
        def when(seconds: float | None) -> pd.Timestamp | NaTType:
            return pd.Timestamp(seconds, unit="s", tz="UTC") if seconds else pd.NaT

        data = {
            "task_id": [r.task_id for r in rows], "status": [r.status for r in rows],
            "error": [r.error for r in rows], "file": [r.file for r in rows],
            "thumbnail": [r.thumbnail for r in rows],
            "submitted_at": [when(r.submitted_at) for r in rows],
            "finished_at": [when(r.finished_at if r.done else None) for r in rows],
            "seconds": [(r.finished_at - r.submitted_at) if r.done and r.finished_at and r.submitted_at
                        else math.nan for r in rows],
        }
        frame = pd.DataFrame(data, columns=list(COLUMNS))
        frame.index = self.index
        return frame


def _may_be_accepted(exc: BaseException) -> bool:
    """Whether a submission that raised may still have created a task (a loss, not a refusal)."""
    from gwlab.errors import ConnectionFailed, ServerError

    return isinstance(exc, ConnectionFailed | ServerError)


def _safe(task_id: str) -> str:
    """A task id as a file name: anything but letters, digits, '-', '_' and '.' becomes '_'."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id).lstrip(".") or "task"

