"""Images: image-generation tasks (`gwlab.wire.images`, docs/guide/tasks.md) over the local preview renderer.

`POST /v1/images/tasks` stores a task (queued) and answers at once; the family's `TaskWorker` renders
it (in_progress, progress 0..100) to completed or failed; `POST .../cancel` makes a queued or running
task cancelled. `GET .../content?variant=image|thumbnail` serves PNGs once completed. Tasks and files
live in the gateway's SQLite, so a restarted gateway resumes unfinished ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import JSONResponse, Response

from gwlab.local.auth import require_key, require_model
from gwlab.local.body import field, read_json
from gwlab.local.errors import APIError
from gwlab.local.jobs.task_worker import Files, TaskWorker, content, load, new_id, page, poll_headers
from gwlab.local.settings import Settings
from gwlab.local.store import KeyRecord
from gwlab.wire import images
from gwlab.wire.images import IMAGE_ID_PREFIX, IMAGES
from gwlab.wire.models import DEFAULT_MODELS
from gwlab.wire.videos import list_params

router = APIRouter(tags=["images"])
Key = Annotated[KeyRecord, Depends(require_key)]

KIND = "image.task"
DEFAULT_SIZE = "512x512"  # a preview: small PNGs in SQLite and in notebooks (OpenAI's sizes are all accepted)
MAX_PROMPT_CHARS = 32_000  # the task body is rewritten at every progress step; keep it small


def _render(task_id: str, task: dict[str, Any], on_step: Callable[[int], bool]) -> Files:
    from gwlab.local.jobs import image_render  # Pillow: the `local` extra

    width, height = (int(n) for n in task["size"].split("x"))
    result = image_render.render(task["prompt"], width, height, on_step)
    return {"image": ("image/png", result.image), "thumbnail": ("image/png", result.thumbnail)}


def setup(app: FastAPI) -> None:
    """Give the app its image render worker: started (and resuming unfinished tasks) with the server."""
    settings: Settings = app.state.settings
    # one pace for both preview renderers (`gwlab serve --video-seconds-per-step`), so tests slow both at once
    worker = app.state.image_worker = TaskWorker(app.state.store, KIND, _render, settings.video_seconds_per_step)
    app.router.on_startup.append(worker.start)
    app.router.on_shutdown.append(worker.stop)


def _worker(request: Request) -> TaskWorker:
    worker: TaskWorker = request.app.state.image_worker  # set by setup()
    return worker


def _load(request: Request, key: KeyRecord, task_id: str) -> dict[str, Any]:
    return load(request, key.id, task_id, kind=KIND, noun="image task", code="image_task", param="task_id")


def _answer(request: Request, task: dict[str, Any]) -> JSONResponse:
    return JSONResponse(task, headers=poll_headers(request.app.state.settings.video_seconds_per_step, task))


@router.post("/images/tasks")
async def create_image_task(request: Request, key: Key) -> JSONResponse:
    body = await read_json(request)  # also refuses any other media type with 415
    prompt = field(body, "prompt", str, required=True)
    if len(prompt) > MAX_PROMPT_CHARS:
        raise APIError(400, f"'prompt' is longer than {MAX_PROMPT_CHARS} characters", param="prompt")
    model = request.state.model = field(body, "model", str, default=DEFAULT_MODELS["images"])
    checked = images.build_create(prompt, model, body.get("size"))  # InvalidRequest naming the field -> 400
    require_model(key, model, IMAGES.name)
    task = {"id": new_id(IMAGE_ID_PREFIX), "object": KIND, "model": model, "status": "queued", "progress": 0,
            "created_at": int(time.time()), "completed_at": None, "cancelled_at": None, "prompt": prompt,
            "size": checked.get("size", DEFAULT_SIZE), "error": None}
    request.app.state.store.save_task(task["id"], key.id, KIND, task)
    _worker(request).submit(task["id"], key.id)
    return _answer(request, task)


@router.get("/images/tasks")
async def list_image_tasks(request: Request, key: Key, limit: int = 20, order: str = "desc",
                           after: str | None = None) -> dict[str, Any]:
    list_params(limit, order, after)  # the videos listing's rules: InvalidRequest naming the parameter -> 400
    return page(request.app.state.store.list_tasks(key.id, KIND), limit, order, after, "image task")


@router.get("/images/tasks/{task_id}")
async def retrieve_image_task(task_id: str, request: Request, key: Key) -> JSONResponse:
    return _answer(request, _load(request, key, task_id))


@router.get("/images/tasks/{task_id}/content")
async def image_task_content(task_id: str, request: Request, key: Key, variant: str = "image") -> Response:
    IMAGES.content_query(variant)  # InvalidRequest naming `variant` -> 400
    task = _load(request, key, task_id)
    return content(request.app.state.store, task, variant, noun="image task", code="image_task", param="task_id",
                   filename=f"{task_id}-{variant}.png")


@router.post("/images/tasks/{task_id}/cancel")
async def cancel_image_task(task_id: str, request: Request, key: Key) -> JSONResponse:
    _load(request, key, task_id)
    task = _worker(request).cancel(task_id, key.id)
    if task is None:  # deleted between the two reads
        raise APIError(404, f"No image task with id '{task_id}'", code="image_task_not_found", param="task_id")
    return _answer(request, task)


@router.delete("/images/tasks/{task_id}")
async def delete_image_task(task_id: str, request: Request, key: Key) -> dict[str, Any]:
    _load(request, key, task_id)
    _worker(request).delete(task_id, key.id)
    return {"id": task_id, "object": "image.task.deleted", "deleted": True}
