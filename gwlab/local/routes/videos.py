"""Videos: the OpenAI videos task API (protocols.md section 8) over the local preview renderer.

A submission is stored as a task (status queued) and rendered by the family's `TaskWorker`
(`gwlab/local/jobs/task_worker.py`), which moves it to in_progress with progress 0..100 and then to
completed or failed, writing every change to SQLite, so a restarted gateway resumes unfinished tasks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from gwlab.local import catalog
from gwlab.local.auth import require_key, require_model
from gwlab.local.body import BodyTooLarge, field, read_json
from gwlab.local.errors import APIError
from gwlab.local.jobs.task_worker import Files, Render, TaskWorker, content, load, new_id, page, poll_headers
from gwlab.local.settings import Settings
from gwlab.local.store import KeyRecord, Store
from gwlab.wire import videos
from gwlab.wire.limits import VIDEO_DEFAULT_VARIANT
from gwlab.wire.models import DEFAULT_MODELS

router = APIRouter(tags=["videos"])
Key = Annotated[KeyRecord, Depends(require_key)]

KIND = "video"
DEFAULT_MODEL = DEFAULT_MODELS["videos"]  # OpenAI defaults an omitted model too (to sora-2)
DEFAULT_SECONDS, DEFAULT_SIZE = "4", "720x1280"
MAX_PROMPT_CHARS = 32_000  # the task body is rewritten at every progress step; keep it small
_FILES = {"video": ("video/mp4", "mp4"), "thumbnail": ("image/png", "png"),
          "spritesheet": ("image/png", "png")}
_REFERENCE = "input_reference"  # stored beside the outputs so a resumed render still has it


# --- the worker ------------------------------------------------------------------------------------


def _renderer(store: Store) -> Render:
    def render(task_id: str, video: dict[str, Any], on_step: Callable[[int], bool]) -> Files:
        from gwlab.local.jobs import video_render  # Pillow and PyAV: the `local` extra

        width, height = (int(n) for n in video["size"].split("x"))
        reference = store.load_content(task_id, _REFERENCE)
        spec = video_render.PreviewSpec(video["prompt"], width, height, int(video["seconds"]),
                                        reference[1] if reference else None)
        result = video_render.render(spec, on_step)
        return {"video": (_FILES["video"][0], result.video), "thumbnail": (_FILES["thumbnail"][0], result.thumbnail),
                "spritesheet": (_FILES["spritesheet"][0], result.spritesheet)}

    return render


def setup(app: FastAPI) -> None:
    """Give the app its render worker: started (and resuming unfinished tasks) with the server."""
    settings: Settings = app.state.settings
    worker = app.state.video_worker = TaskWorker(app.state.store, KIND, _renderer(app.state.store),
                                                 settings.video_seconds_per_step)
    app.router.on_startup.append(worker.start)
    app.router.on_shutdown.append(worker.stop)


def _worker(request: Request) -> TaskWorker:
    worker: TaskWorker = request.app.state.video_worker  # set by setup()
    return worker


# --- reading a submission --------------------------------------------------------------------------


async def _read_submission(request: Request) -> tuple[dict[str, Any], bytes | None]:
    """The fields of a JSON or multipart (what the openai SDK sends) submission, and a reference image."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "multipart/form-data":
        body = await read_json(request)  # also refuses any other media type with 415
        if body.get(_REFERENCE) is not None:
            raise APIError(400, "input_reference as an object (image_url or file_id) is not supported by "
                           "the local preview renderer; upload the image as a multipart file part",
                           param=_REFERENCE)
        return body, None
    if getattr(request.state, "body_too_large", False):
        raise BodyTooLarge()
    try:
        form = await request.form()
    except AssertionError:  # Starlette's way of saying python-multipart is missing
        raise APIError(415, "multipart bodies need python-multipart (pip install 'gwlab[local]'); "
                       "send application/json instead", param="Content-Type") from None
    except HTTPException as exc:
        raise APIError(400, f"The multipart body could not be parsed: {exc.detail}", param="body") from None
    fields: dict[str, Any] = {}
    reference: bytes | None = None
    for name, value in form.multi_items():
        if name == _REFERENCE and isinstance(value, UploadFile):
            reference = await value.read()
        elif name.startswith(_REFERENCE):
            raise APIError(400, "input_reference must be an uploaded image file here; reference objects "
                           "(image_url, file_id) are not supported by the local preview renderer", param=name)
        elif isinstance(value, UploadFile):
            raise APIError(400, f"'{name}' must be a form field, not a file", param=name)
        else:
            fields[name] = value
    if reference is not None:
        try:
            from gwlab.local.jobs.video_render import check_image

            check_image(reference)
        except ImportError:
            pass  # no Pillow: the render fails with renderer_unavailable, which says what to install
        except ValueError as exc:
            raise APIError(400, f"input_reference: {exc}", param=_REFERENCE) from None
    return fields, reference


def _model(key: KeyRecord, body: dict[str, Any]) -> str:
    model: str = field(body, "model", str, default=DEFAULT_MODEL)
    if isinstance(model, str) and model and catalog.find(model) is None:
        # the openai SDK's examples send sora-2; say plainly what this gateway can do instead
        raise APIError(404, f"The model '{model}' does not exist on the local gateway; use "
                       f"'{DEFAULT_MODEL}' (a preview renderer, not a generative model) or omit 'model'",
                       code="model_not_found", param="model")
    require_model(key, model, "videos")
    return model


def _new_video(model: str, prompt: str, size: str, seconds: str,
               remixed_from: str | None = None) -> dict[str, Any]:
    return {"id": new_id("video_"), "object": "video", "model": model, "status": "queued", "progress": 0,
            "created_at": int(time.time()), "completed_at": None, "expires_at": None, "prompt": prompt,
            "size": size, "seconds": seconds, "remixed_from_video_id": remixed_from, "error": None}


def _prompt(body: dict[str, Any]) -> str:
    prompt: str = videos.build_remix(body.get("prompt"))["prompt"]  # the client's validator: one rule, both sides
    if len(prompt) > MAX_PROMPT_CHARS:
        raise APIError(400, f"'prompt' is longer than {MAX_PROMPT_CHARS} characters", param="prompt")
    return prompt


def _submit(request: Request, key: KeyRecord, video: dict[str, Any], reference: bytes | None) -> JSONResponse:
    store: Store = request.app.state.store
    store.save_task(video["id"], key.id, KIND, video)  # first: content is kept only for a task that exists
    if reference is not None:
        store.save_content(video["id"], _REFERENCE, "application/octet-stream", reference)
    _worker(request).submit(video["id"], key.id)
    return JSONResponse(video, headers=_poll_headers(request, video))


def _poll_headers(request: Request, video: dict[str, Any]) -> dict[str, str]:
    """`openai-poll-after-ms`: the SDK's poll helper waits this long instead of a full second."""
    return poll_headers(request.app.state.settings.video_seconds_per_step, video)


def _load(request: Request, key: KeyRecord, video_id: str) -> dict[str, Any]:
    return load(request, key.id, video_id, kind=KIND, noun="video", code="video", param="video_id")


# --- the endpoints ---------------------------------------------------------------------------------


@router.post("/videos")
async def create_video(request: Request, key: Key) -> JSONResponse:
    body, reference = await _read_submission(request)
    prompt = _prompt(body)  # the required field first, as OpenAI reports it
    model = request.state.model = _model(key, body)
    # the client's validator: InvalidRequest naming the field -> 400; seconds 4 reads as "4"
    checked = videos.build_create(prompt, model, body.get("seconds"), body.get("size"))
    seconds, size = checked.get("seconds", DEFAULT_SECONDS), checked.get("size", DEFAULT_SIZE)
    return _submit(request, key, _new_video(model, prompt, size, seconds), reference)


@router.post("/videos/{video_id}/remix")
async def remix_video(video_id: str, request: Request, key: Key) -> JSONResponse:
    prompt = _prompt(await read_json(request))
    source = _load(request, key, video_id)
    video = _new_video(source["model"], prompt, source["size"], source["seconds"], remixed_from=video_id)
    reference = request.app.state.store.load_content(video_id, _REFERENCE)
    return _submit(request, key, video, reference[1] if reference else None)


@router.get("/videos")
async def list_videos(request: Request, key: Key, limit: int = 20, order: str = "desc",
                      after: str | None = None) -> dict[str, Any]:
    videos.list_params(limit, order, after)  # InvalidRequest naming the parameter -> 400
    return page(request.app.state.store.list_tasks(key.id, KIND), limit, order, after, "video")


@router.get("/videos/{video_id}")
async def retrieve_video(video_id: str, request: Request, key: Key) -> JSONResponse:
    video = _load(request, key, video_id)
    return JSONResponse(video, headers=_poll_headers(request, video))


@router.get("/videos/{video_id}/content")
async def video_content(video_id: str, request: Request, key: Key,
                        variant: str = VIDEO_DEFAULT_VARIANT) -> Response:
    videos.content_params(variant)
    video = _load(request, key, video_id)
    return content(request.app.state.store, video, variant, noun="video", code="video", param="video_id",
                   filename=f"{video_id}.{_FILES[variant][1]}")


@router.delete("/videos/{video_id}")
async def delete_video(video_id: str, request: Request, key: Key) -> dict[str, Any]:
    _load(request, key, video_id)
    _worker(request).delete(video_id, key.id)
    return {"id": video_id, "object": "video.deleted", "deleted": True}
