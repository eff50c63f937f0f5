"""The local gateway's batch worker: runs OpenAI batches and Anthropic message batches in the background.

One asyncio task on the server's loop takes jobs in submission order and runs their lines one at a
time through the gateway's own routes (`batch_lines.run_line`). Every finished line is appended to the
job's result file before the job's counts are saved, and a resumed job skips the lines its files
already hold, so a gateway restarted on the same database finishes its jobs without running a line
twice. Before each line the worker re-reads the job: a cancel request or a passed window stops it,
and the lines that never ran are written as cancelled or expired, beside the finished ones, as the
providers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.local.jobs.batch_lines import LineAnswer, run_line
from gwlab.local.settings import Settings
from gwlab.local.store import KeyRecord, Store
from gwlab.wire.families import FAMILIES
from gwlab.wire.jobs import batches as wb
from gwlab.wire.limits import API_PREFIX

log = logging.getLogger("gwlab.local")
OPENAI_KIND, ANTHROPIC_KIND = "batch", "message_batch"
_OPENAI_ENDING = {"cancelled": ("batch_cancelled", "cancelled"), "expired": ("batch_expired", "expired")}
_ANTHROPIC_ENDING = {"cancelled": "canceled", "expired": "expired"}


def _now() -> int:
    return int(time.time())


def iso(seconds: float | None) -> str | None:
    """RFC 3339 UTC, as Anthropic writes times."""
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass(frozen=True, slots=True)
class JobFiles:
    """Where a job's bytes live: the result files are appended to line by line."""

    root: Path
    job_id: str

    def output(self) -> Path:
        return self.root / f"{self.job_id}.output.jsonl"

    def errors(self) -> Path:
        return self.root / f"{self.job_id}.errors.jsonl"

    def requests(self) -> Path:
        return self.root / f"{self.job_id}.requests.jsonl"

    def results(self) -> Path:
        return self.root / f"{self.job_id}.results.jsonl"


def _append(path: Path, obj: dict[str, Any]) -> None:
    with path.open("ab") as f:
        f.write((json.dumps(obj, separators=(",", ":")) + "\n").encode())
        f.flush()
        os.fsync(f.fileno())


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, object or None) of a JSONL file, read a line at a time (files may be 200 MB)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                yield n, json.loads(raw)
            except ValueError:
                yield n, None


class BatchWorker:
    """Runs the jobs of both batch APIs, one line at a time, on the server's event loop."""

    def __init__(self, app: Any, store: Store, settings: Settings, root: Path) -> None:
        self.app, self.store, self.settings, self.root = app, store, settings, root
        self._queue: asyncio.Queue[tuple[str, str, int]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.current: str | None = None

    # --- life --------------------------------------------------------------------------------------
    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._queue = asyncio.Queue()
        for kind, terminal in ((OPENAI_KIND, wb.OPENAI_TERMINAL), (ANTHROPIC_KIND, wb.ANTHROPIC_TERMINAL)):
            status = "status" if kind == OPENAI_KIND else "processing_status"
            for job_id, key_id, job in self.store.tasks_of_kind(kind):
                if job.get(status) not in terminal:
                    self._queue.put_nowait((kind, job_id, key_id))
        self._task = asyncio.create_task(self._run(), name="gwlab-batch-worker")

    async def stop(self) -> None:
        """Stop between lines; an interrupted job keeps its status and resumes at the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def cancel(self, kind: str, job_id: str, key_id: int) -> None:
        """Ask a job to stop; one that is not running now is ended here, its finished lines kept."""
        job = JOB_TYPES[kind](self, job_id, key_id)
        body = job.load()
        if kind == OPENAI_KIND:
            body.update(status="cancelling", cancelling_at=_now())
        else:
            body.update(processing_status="canceling", cancel_initiated_at=iso(time.time()))
        job.save(body)
        if self.current != job_id:
            job.finish("cancelled", job.done())

    def submit(self, kind: str, job_id: str, key_id: int) -> None:
        assert self._queue is not None, "the batch worker starts with the server"
        self._queue.put_nowait((kind, job_id, key_id))

    def files(self, job_id: str) -> JobFiles:
        return JobFiles(self.root, job_id)

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            kind, job_id, key_id = await self._queue.get()
            self.current = job_id
            try:
                await JOB_TYPES[kind](self, job_id, key_id).run()
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken job must not end the worker
                log.exception("batch %s failed in the worker", job_id)
            finally:
                self.current = None

    # --- shared by the jobs ------------------------------------------------------------------------
    def window_passed(self, job: dict[str, Any], ran: int) -> bool:
        cap = self.settings.batch_expire_after
        return time.time() >= float(job["_expires"]) or (cap is not None and ran >= cap)

    async def pace(self) -> None:
        await asyncio.sleep(self.settings.batch_seconds_per_request)


class _Job:
    """What a job of either API holds: its worker, id, key and files; its stored object, read and written."""

    kind: str
    status_field: str
    cancelling: str  # the status a cancel request sets

    def __init__(self, worker: BatchWorker, job_id: str, key_id: int) -> None:
        self.w, self.id, self.key_id = worker, job_id, key_id
        self.paths = worker.files(job_id)

    def load(self) -> dict[str, Any]:
        job = self.w.store.load_task(self.id, self.key_id)
        assert job is not None
        return job

    def save(self, job: dict[str, Any]) -> None:
        self.w.store.save_task(self.id, self.key_id, self.kind, job)

    def stop_reason(self, job: dict[str, Any], done: Sized) -> str | None:
        """Before each line: "cancelled" once a cancel was asked, "expired" once the window passed."""
        if job[self.status_field] == self.cancelling:
            return "cancelled"
        return "expired" if self.w.window_passed(job, len(done)) else None


class OpenAIJob(_Job):
    """An OpenAI batch: validating -> in_progress -> finalizing -> completed | expired | cancelled | failed."""

    kind, status_field, cancelling = OPENAI_KIND, "status", "cancelling"

    def _input(self, job: dict[str, Any]) -> Path | None:
        found = self.w.store.load_file(job["input_file_id"], self.key_id)
        return Path(found[1]) if found and Path(found[1]).exists() else None

    async def run(self) -> None:
        job = self.load()
        key = self.w.store.key_by_id(self.key_id)
        if job["status"] in wb.OPENAI_TERMINAL or key is None:
            return
        source = self._input(job)
        if job["status"] == "validating" and not self._validate(job, source):
            return
        assert source is not None
        done = self.done()
        seen: set[str] = set()
        ending = "completed"
        for n, obj in _lines(source):
            job = self.load()
            if stop := self.stop_reason(job, done):
                ending = stop
                break
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            if n in done:
                if isinstance(cid, str):
                    seen.add(cid)
                continue
            await self._one(job, key, n, obj, seen)
            done.add(n)
        self.finish(ending, done)

    def done(self) -> set[int]:
        """The input line numbers the result files already hold."""
        return {n for p in (self.paths.output(), self.paths.errors()) for n in self._line_numbers(p)}

    def _validate(self, job: dict[str, Any], source: Path | None) -> bool:
        if self.w.window_passed(job, 0):
            self.finish("expired", set())
            return False
        errors: list[dict[str, Any]] = []
        total = sum(1 for _ in _lines(source)) if source else 0
        if source is None:
            errors.append({"code": "invalid_file", "message": "The input file no longer exists", "param":
                           "input_file_id", "line": None})
        elif total == 0:
            errors.append({"code": "empty_file", "message": "The input file has no requests", "param":
                           "input_file_id", "line": None})
        elif total > wb.OPENAI_BATCHES.max_requests:
            errors.append({"code": "too_many_requests", "message": f"The input file has {total} requests; "
                           f"a batch takes at most {wb.OPENAI_BATCHES.max_requests}", "param": "input_file_id",
                           "line": None})
        if errors:
            job.update(status="failed", failed_at=_now(), errors={"object": "list", "data": errors})
            self.save(job)
            return False
        job.update(status="in_progress", in_progress_at=_now())
        job["request_counts"]["total"] = total
        self.save(job)
        return True

    @staticmethod
    def _line_numbers(path: Path) -> Iterator[int]:
        for _, obj in _lines(path):
            rid = obj.get("id") if isinstance(obj, dict) else None
            if isinstance(rid, str) and "_" in rid:
                yield int(rid.rsplit("_", 1)[1])

    def _request_id(self, n: int) -> str:
        return f"batch_req_{self.id.removeprefix('batch_')}_{n}"

    async def _one(self, job: dict[str, Any], key: KeyRecord, n: int, obj: Any, seen: set[str]) -> None:
        cid = obj.get("custom_id") if isinstance(obj, dict) else None
        try:
            cid, body = wb.check_openai_line(obj, job["endpoint"])
            if cid in seen:
                raise InvalidRequest("custom_id", f"duplicate custom_id {cid!r}: each line needs its own")
        except InvalidRequest as exc:
            self._write(n, cid, None, {"code": "invalid_request", "message": f"line {n}: {exc}", "param": exc.field,
                                       "line": n})
            return
        seen.add(cid)
        await self.w.pace()
        answer = await run_line(self.w.app, key, job["endpoint"], body)
        self._write(n, cid, answer, None)

    def _write(self, n: int, cid: Any, answer: LineAnswer | None, error: dict[str, Any] | None) -> None:
        response = None if answer is None else {"status_code": answer.status, "request_id": self._request_id(n),
                                                "body": answer.body}
        ok = answer is not None and answer.status == 200
        _append(self.paths.output() if ok else self.paths.errors(),
                {"id": self._request_id(n), "custom_id": cid, "response": response, "error": error})
        job = self.load()  # re-read: a cancel may have landed while the line ran
        counts = job["request_counts"]
        counts["completed" if ok else "failed"] += 1
        if ok and answer is not None:
            usage = job.setdefault("usage", {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                                             "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                             "total_tokens": 0})
            usage["input_tokens"] += answer.usage[0] or 0
            usage["output_tokens"] += answer.usage[1] or 0
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        self.save(job)

    def finish(self, ending: str, done: set[int]) -> None:
        """Write the unrun lines as cancelled or expired, publish the result files, set the final status."""
        job = self.load()
        unrun = 0
        if ending in _OPENAI_ENDING:
            code, word = _OPENAI_ENDING[ending]
            source = self._input(job)
            with self.paths.errors().open("ab") as f:  # one write for all of them: 50,000 may expire at once
                for n, obj in _lines(source) if source else ():
                    if n not in done:
                        cid = obj.get("custom_id") if isinstance(obj, dict) else None
                        error = {"code": code, "message": f"This request was not run: the batch was {word} "
                                 "before it was reached", "param": None, "line": n}
                        f.write((json.dumps({"id": self._request_id(n), "custom_id": cid, "response": None,
                                             "error": error}, separators=(",", ":")) + "\n").encode())
                        unrun += 1
                f.flush()
                os.fsync(f.fileno())
            job = self.load()
        else:
            job.update(status="finalizing", finalizing_at=_now())
            self.save(job)
        counts = job["request_counts"]
        counts["failed"] += unrun
        counts["total"] = max(counts["total"], counts["completed"] + counts["failed"])
        job["output_file_id"] = self._publish(self.paths.output(), job)
        job["error_file_id"] = self._publish(self.paths.errors(), job)
        job.update(status=ending, **{f"{ending}_at": _now()})
        self.save(job)

    def _publish(self, path: Path, job: dict[str, Any]) -> str | None:
        if not path.exists() or path.stat().st_size == 0:
            return None
        from gwlab.local.routes.files import register  # the files route owns the file object's shape

        kind = "output" if path == self.paths.output() else "error"
        return register(self.w.store, self.key_id, path, f"{job['id']}_{kind}.jsonl", wb.OUTPUT_PURPOSE)


class AnthropicJob(_Job):
    """A message batch: in_progress -> canceling -> ended, one result per request."""

    kind, status_field, cancelling = ANTHROPIC_KIND, "processing_status", "canceling"

    async def run(self) -> None:
        job = self.load()
        key = self.w.store.key_by_id(self.key_id)
        if job["processing_status"] == "ended" or key is None:
            return
        done = self.done()
        ending = "ended"
        for _, obj in _lines(self.paths.requests()):
            if stop := self.stop_reason(self.load(), done):
                ending = stop
                break
            if obj["custom_id"] in done:
                continue
            await self.w.pace()
            answer = await run_line(self.w.app, key, FAMILIES["messages"].route, obj["params"])
            self._write(obj["custom_id"], _result(answer))
            done.add(obj["custom_id"])
        self.finish(ending, done)

    def done(self) -> set[Any]:
        return {obj.get("custom_id") for _, obj in _lines(self.paths.results()) if isinstance(obj, dict)}

    def _write(self, cid: str, result: dict[str, Any]) -> None:
        _append(self.paths.results(), {"custom_id": cid, "result": result})
        job = self.load()
        counts = job["request_counts"]
        counts["processing"] -= 1
        counts[result["type"]] += 1
        self.save(job)

    def finish(self, ending: str, done: set[Any]) -> None:
        kind = _ANTHROPIC_ENDING.get(ending)
        unrun = 0
        if kind is not None:
            with self.paths.results().open("ab") as f:
                for _, obj in _lines(self.paths.requests()):
                    if obj["custom_id"] not in done:
                        f.write((json.dumps({"custom_id": obj["custom_id"], "result": {"type": kind}}) + "\n").encode())
                        unrun += 1
                f.flush()
                os.fsync(f.fileno())
        job = self.load()
        counts = job["request_counts"]
        counts["processing"] -= unrun
        if kind is not None:
            counts[kind] += unrun
        job.update(processing_status="ended", ended_at=iso(time.time()),
                   results_url=API_PREFIX + wb.ANTHROPIC_BATCHES.path(str(wb.ANTHROPIC_BATCHES.results_path), self.id))
        self.save(job)


JOB_TYPES: dict[str, type[OpenAIJob] | type[AnthropicJob]] = {OPENAI_KIND: OpenAIJob, ANTHROPIC_KIND: AnthropicJob}


def _result(answer: LineAnswer) -> dict[str, Any]:
    if answer.status == 200:
        return {"type": "succeeded", "message": answer.body}
    return {"type": "errored", "error": answer.body}
