"""Message batches: Anthropic's `/v1/messages/batches`, run by the same batch worker as OpenAI batches.

The requests are checked at creation (a malformed entry or a duplicate `custom_id` refuses the batch
with the field named, as Anthropic does); a request whose params the model refuses becomes an
`errored` result, never a failed batch. The requests go to disk, one JSON line each.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import FileResponse

from gwlab.errors import InvalidRequest
from gwlab.local.auth import require_messages_key
from gwlab.local.errors import APIError
from gwlab.local.jobs.batch_worker import ANTHROPIC_KIND, iso
from gwlab.local.jobs.task_worker import cursor_slice, new_id
from gwlab.local.routes.batches import JobKind, load_job, window, worker
from gwlab.local.store import KeyRecord
from gwlab.wire.jobs import batches as wb

router = APIRouter(tags=["message_batches"])
Key = Annotated[KeyRecord, Depends(require_messages_key)]
MESSAGE_BATCH = JobKind("type", ANTHROPIC_KIND, code="not_found", param="message_batch_id")
RESULTS_TTL_SECONDS = 29 * 24 * 3600


async def _requests(request: Request) -> list[tuple[str, dict[str, Any]]]:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise APIError(415, "Content-Type must be application/json", param="Content-Type")
    if getattr(request.state, "body_too_large", False):
        raise APIError(413, f"The batch exceeds {wb.ANTHROPIC_BATCHES.max_bytes} bytes", param="requests")
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise APIError(400, f"The body is not valid JSON: {exc}", param="body") from None
    items = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(items, list) or not items:
        raise APIError(400, "'requests' must be a non-empty array", param="requests")
    if len(items) > wb.ANTHROPIC_BATCHES.max_requests:
        raise APIError(400, f"'requests' holds {len(items)}; at most {wb.ANTHROPIC_BATCHES.max_requests}",
                       param="requests")
    pairs = [wb.check_anthropic_request(obj, i) for i, obj in enumerate(items)]
    try:
        wb.check_custom_ids([cid for cid, _ in pairs], wb.ANTHROPIC_BATCHES)
    except InvalidRequest as exc:
        raise APIError(400, f"requests: {exc}", param="requests") from None
    return pairs


def _render(request: Request, job: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in job.items() if not k.startswith("_")}  # Anthropic sends its nulls
    if out.get("results_url"):
        out["results_url"] = str(request.base_url).rstrip("/") + out["results_url"]
    return out


@router.post("/messages/batches")
async def create_message_batch(request: Request, key: Key) -> dict[str, Any]:
    pairs = await _requests(request)
    now = time.time()
    job_id = new_id("msgbatch_")
    path = worker(request).files(job_id).requests()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for cid, params in pairs:
            f.write(json.dumps({"custom_id": cid, "params": params}, separators=(",", ":")) + "\n")
    job = {"id": job_id, "type": "message_batch", "processing_status": "in_progress",
           "request_counts": {"processing": len(pairs), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
           "ended_at": None, "created_at": iso(now), "expires_at": iso(now + window(request)),
           "archived_at": None, "cancel_initiated_at": None, "results_url": None,
           "_expires": now + window(request)}
    request.app.state.store.save_task(job_id, key.id, ANTHROPIC_KIND, job)
    worker(request).submit(ANTHROPIC_KIND, job_id, key.id)
    return _render(request, job)


@router.get("/messages/batches")
async def list_message_batches(request: Request, key: Key, limit: int = 20, after_id: str | None = None,
                               before_id: str | None = None) -> dict[str, Any]:
    if not 1 <= limit <= 1000:
        raise APIError(400, "'limit' must be from 1 to 1000", param="limit")
    jobs = sorted(request.app.state.store.list_tasks(key.id, ANTHROPIC_KIND), key=lambda j: j["id"], reverse=True)
    chosen, more = cursor_slice(jobs, limit, after_id, before_id)  # an unknown cursor: an empty page
    return {"data": [_render(request, j) for j in chosen], "has_more": more,
            "first_id": chosen[0]["id"] if chosen else None, "last_id": chosen[-1]["id"] if chosen else None}


@router.get("/messages/batches/{batch_id}")
async def retrieve_message_batch(batch_id: str, request: Request, key: Key) -> dict[str, Any]:
    return _render(request, load_job(request, key, batch_id, MESSAGE_BATCH))


@router.post("/messages/batches/{batch_id}/cancel")
async def cancel_message_batch(batch_id: str, request: Request, key: Key) -> dict[str, Any]:
    job = load_job(request, key, batch_id, MESSAGE_BATCH)
    if job["processing_status"] == "in_progress":
        worker(request).cancel(ANTHROPIC_KIND, batch_id, key.id)
        job = load_job(request, key, batch_id, MESSAGE_BATCH)
    return _render(request, job)


@router.get("/messages/batches/{batch_id}/results")
async def message_batch_results(batch_id: str, request: Request, key: Key) -> FileResponse:
    job = load_job(request, key, batch_id, MESSAGE_BATCH)
    if job["processing_status"] != "ended":
        raise APIError(404, f"The message batch '{batch_id}' is still {job['processing_status']}; its results "
                       "can be read once it has ended", code="not_found", param="message_batch_id")
    path = worker(request).files(batch_id).results()
    return FileResponse(path, media_type="application/binary")


@router.delete("/messages/batches/{batch_id}")
async def delete_message_batch(batch_id: str, request: Request, key: Key) -> dict[str, Any]:
    job = load_job(request, key, batch_id, MESSAGE_BATCH)
    if job["processing_status"] != "ended":
        raise APIError(400, f"The message batch '{batch_id}' is still {job['processing_status']}; cancel it first",
                       param="message_batch_id")
    request.app.state.store.delete_task(batch_id, key.id)
    return {"id": batch_id, "type": "message_batch_deleted"}
