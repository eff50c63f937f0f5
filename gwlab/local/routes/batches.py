"""Batches: OpenAI's `/v1/batches` over an uploaded JSONL file, run by the batch worker.

A batch is stored as a task (kind `batch`) and run line by line by `BatchWorker`
(gwlab/local/jobs/batch_worker.py) in the background; a batch belongs to the key that created it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request

from gwlab.local.auth import require_key
from gwlab.local.body import field, read_json
from gwlab.local.errors import APIError
from gwlab.local.jobs.batch_worker import OPENAI_KIND, BatchWorker
from gwlab.local.jobs.task_worker import new_id, page
from gwlab.local.routes.files import files_root
from gwlab.local.routes.files import load as load_file
from gwlab.local.store import KeyRecord
from gwlab.wire.jobs import batches as wb

router = APIRouter(tags=["batches"])
Key = Annotated[KeyRecord, Depends(require_key)]


def setup(app: FastAPI) -> None:
    """Give the app its batch worker (both batch APIs share it), started and resumed with the server."""
    root = files_root(app)
    worker = app.state.batch_worker = BatchWorker(app, app.state.store, app.state.settings, root)
    app.router.on_startup.append(worker.start)
    app.router.on_shutdown.append(worker.stop)


def worker(request: Request) -> BatchWorker:
    batch_worker: BatchWorker = request.app.state.batch_worker  # set by setup()
    return batch_worker


def window(request: Request) -> float:
    configured = request.app.state.settings.batch_window_seconds
    return wb.WINDOW_SECONDS if configured is None else float(configured)


def public(job: dict[str, Any]) -> dict[str, Any]:
    """The stored job without the worker's private fields, and without unset ones: the official schema
    types `output_file_id`, the timestamps and `errors` as non-null when present (omit, never null)."""
    return {k: v for k, v in job.items() if not k.startswith("_") and v is not None}


def _metadata(body: dict[str, Any]) -> dict[str, str] | None:
    meta: dict[str, str] | None = field(body, "metadata", dict)  # its values checked below
    if meta is None:
        return None
    if len(meta) > wb.MAX_METADATA_KEYS or not all(isinstance(v, str) for v in meta.values()):
        raise APIError(400, f"'metadata' holds at most {wb.MAX_METADATA_KEYS} string values", param="metadata")
    return meta


@dataclass(frozen=True, slots=True)
class JobKind:
    """A kind of batch job as its routes find it: the stored object's discriminator (`field` == `value`),
    and the code and path parameter its 404 names."""

    field: str
    value: str
    code: str
    param: str


BATCH = JobKind("object", OPENAI_KIND, code="batch_not_found", param="batch_id")


def load_job(request: Request, key: KeyRecord, batch_id: str, kind: JobKind) -> dict[str, Any]:
    """The key's job of this kind, else the API's 404: another key's job, a task of another kind and no
    job at all look the same."""
    job: dict[str, Any] | None = request.app.state.store.load_task(batch_id, key.id)
    if job is None or job.get(kind.field) != kind.value:
        noun = kind.value.replace("_", " ")
        raise APIError(404, f"No {noun} with id '{batch_id}'", code=kind.code, param=kind.param)
    return job


@router.post("/batches")
async def create_batch(request: Request, key: Key) -> dict[str, Any]:
    body = await read_json(request)
    input_file_id = field(body, "input_file_id", str, required=True)
    endpoint = field(body, "endpoint", str, required=True)
    if endpoint not in wb.OPENAI_ENDPOINTS or endpoint == "/v1/completions":
        served = [e for e in wb.OPENAI_ENDPOINTS if e != "/v1/completions"]
        raise APIError(400, f"'endpoint' must be one of {', '.join(served)} here, got {endpoint!r}", param="endpoint")
    if field(body, "completion_window", str, required=True) != wb.COMPLETION_WINDOW:
        raise APIError(400, f"'completion_window' must be {wb.COMPLETION_WINDOW!r}", param="completion_window")
    meta = _metadata(body)
    file, _ = load_file(request, key, input_file_id)
    if file["purpose"] != wb.FILE_PURPOSE:
        raise APIError(400, f"The file '{input_file_id}' has purpose {file['purpose']!r}, not 'batch'",
                       param="input_file_id")
    now = time.time()
    job = {"id": new_id("batch_"), "object": "batch", "endpoint": endpoint, "errors": None,
           "input_file_id": input_file_id, "completion_window": wb.COMPLETION_WINDOW, "status": "validating",
           "output_file_id": None, "error_file_id": None, "created_at": int(now), "in_progress_at": None,
           "expires_at": int(now + window(request)), "finalizing_at": None, "completed_at": None,
           "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
           "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": meta,
           "_expires": now + window(request)}
    request.app.state.store.save_task(job["id"], key.id, OPENAI_KIND, job)
    worker(request).submit(OPENAI_KIND, job["id"], key.id)
    return public(job)


@router.get("/batches")
async def list_batches(request: Request, key: Key, limit: int = 20, after: str | None = None) -> dict[str, Any]:
    if not 1 <= limit <= 100:
        raise APIError(400, "'limit' must be from 1 to 100", param="limit")
    jobs = [public(j) for j in request.app.state.store.list_tasks(key.id, OPENAI_KIND)]
    return page(jobs, limit, "desc", after, "batch")


@router.get("/batches/{batch_id}")
async def retrieve_batch(batch_id: str, request: Request, key: Key) -> dict[str, Any]:
    return public(load_job(request, key, batch_id, BATCH))


@router.post("/batches/{batch_id}/cancel")
async def cancel_batch(batch_id: str, request: Request, key: Key) -> dict[str, Any]:
    job = load_job(request, key, batch_id, BATCH)
    if job["status"] in wb.OPENAI_TERMINAL or job["status"] == "cancelling":
        if job["status"] != "cancelling" and job["status"] != "cancelled":
            raise APIError(400, f"The batch '{batch_id}' is {job['status']} and cannot be cancelled",
                           param="batch_id")
        return public(job)
    worker(request).cancel(OPENAI_KIND, batch_id, key.id)
    return public(load_job(request, key, batch_id, BATCH))
