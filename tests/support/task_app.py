"""A differently shaped task API, served by a small app on loopback: the "third family" of the task tests.

Its shape is DashScope's image-synthesis task API (a widely used one): the submission nests the prompt
under `input`, the answer nests the id and status under `output`, statuses are upper-case (PENDING,
RUNNING, SUCCEEDED, FAILED, CANCELED) and times are milliseconds. Ids hold a space and a '?', so a
client that does not URL-encode path parameters cannot reach them. Each poll advances a task one
state, so tests need no clock. Words in a prompt steer its task: "fail" fails it, "forever" keeps it
running, "vanish" makes it 404, a leading "hold " keeps the submission's answer back until `release` is set.
The result is served as a PNG, as JSON metadata or as plain text, to check that downloads are parsed
by their Content-Type.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image

from bench.harness.loopback import serve_app
from gwlab.wire.jobs.tasks import TaskFamily

KEY = "third-family-key"
FAMILY = TaskFamily(
    name="synthesis", submit_path="/services/aigc/image-synthesis", item_path="/tasks/{task_id}",
    content_path="/tasks/{task_id}/result", variant_param="format", variants=("png", "meta", "caption"),
    list_path="/tasks", cancel_path="/tasks/{task_id}/cancel", id_field="output.task_id",
    status_field="output.task_status", progress_field=None, error_field="output.message",
    created_field="output.submit_time", prompt_field="input.prompt", model_field="model",
    queued=("PENDING",), completed=("SUCCEEDED",), failed=("FAILED",), cancelled=("CANCELED",),
    list_items_field="data", list_last_id_field=None, list_has_more_field=None, list_after_param=None,
    list_params=(), poll_after_header=None)
_STEPS = ("PENDING", "RUNNING", "SUCCEEDED")


@dataclass
class Server:
    app: FastAPI
    base_url: str = ""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: int = 0
    # a submission whose prompt starts with "hold " is accepted, then answered only once this is set
    release: threading.Event = field(default_factory=threading.Event)


def _png(prompt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (len(prompt) * 7 % 255, 90, 160)).save(out, format="PNG")
    return out.getvalue()


def build() -> Server:
    app = FastAPI()
    server = Server(app)
    numbers = itertools.count(1)

    def check(authorization: str | None) -> None:
        if authorization != f"Bearer {KEY}":
            raise HTTPException(401, "bad key")

    def task(task_id: str) -> dict[str, Any]:
        if task_id not in server.tasks:
            raise HTTPException(404, f"no task {task_id}")
        return server.tasks[task_id]

    def view(t: dict[str, Any]) -> dict[str, Any]:
        hidden = ("step", "fails", "last", "prompt", "model")
        return {"request_id": "r", "output": {k: v for k, v in t.items() if k not in hidden}, "model": t["model"]}

    @app.post("/v1/services/aigc/image-synthesis")
    async def submit(request: Request, authorization: str | None = Header(None)) -> JSONResponse:
        check(authorization)
        body = await request.json()
        server.submissions += 1
        task_id = f"t {next(numbers)}?x"
        prompt = body["input"]["prompt"]
        fails = "fail" in prompt
        server.tasks[task_id] = {"task_id": task_id, "task_status": "PENDING", "submit_time": int(time.time() * 1000),
                                 "prompt": prompt, "model": body["model"], "step": 0, "fails": fails,
                                 "last": 1 if "forever" in prompt else 2}
        if prompt.startswith("hold "):  # accepted; the answer waits (bounded) for the test to let it go
            await asyncio.get_running_loop().run_in_executor(None, server.release.wait, 60)
        return JSONResponse(view(server.tasks[task_id]))

    @app.get("/v1/tasks")
    async def listing(authorization: str | None = Header(None)) -> dict[str, Any]:
        check(authorization)
        newest = sorted(server.tasks.values(), key=lambda t: t["submit_time"], reverse=True)
        return {"data": [{**view(t), "input": {"prompt": t["prompt"]}} for t in newest]}

    @app.get("/v1/tasks/{task_id}")
    async def retrieve(task_id: str, authorization: str | None = Header(None)) -> dict[str, Any]:
        check(authorization)
        t = task(task_id)
        if "vanish" in t["prompt"]:  # deleted on the gateway's side after its submission
            raise HTTPException(404, f"no task {task_id}")
        if t["task_status"] in ("PENDING", "RUNNING"):
            t["step"] += 1
            t["task_status"] = "FAILED" if t["fails"] and t["step"] == 2 else _STEPS[min(t["step"], t["last"])]
            if t["task_status"] == "FAILED":
                t["message"] = "the prompt asked to fail"
        return view(t)

    @app.post("/v1/tasks/{task_id}/cancel")
    async def cancel(task_id: str, authorization: str | None = Header(None)) -> dict[str, Any]:
        check(authorization)
        t = task(task_id)
        if t["task_status"] in ("PENDING", "RUNNING"):
            t["task_status"] = "CANCELED"
        return view(t)

    @app.get("/v1/tasks/{task_id}/result")
    async def result(task_id: str, format: str = "png", authorization: str | None = Header(None)) -> Response:
        check(authorization)
        t = task(task_id)
        if t["task_status"] != "SUCCEEDED":
            raise HTTPException(404, "not ready")
        if format == "meta":
            return JSONResponse({"task_id": task_id, "width": 64, "height": 48})
        if format == "caption":
            return Response(f"caption of {t['prompt']}", media_type="text/plain")
        return Response(_png(t["prompt"]), media_type="image/png")

    return server


@contextmanager
def serving() -> Iterator[Server]:
    """The app on a free loopback port, in a thread; stopped at the end."""
    server = build()
    with serve_app(server.app) as root:
        server.base_url = f"{root}/v1"
        yield server


class LoseAnswers(httpx.AsyncBaseTransport):
    """A real transport whose first `count` answers to submissions (POST to `path`) are lost after the
    server received them: fault injection for "may have been accepted", with the real server behind it."""

    def __init__(self, path: str, count: int = 1, *, listing_fails: bool = False) -> None:
        self.inner, self.path, self.count = httpx.AsyncHTTPTransport(), path, count
        self.listing_fails = listing_fails  # the lookup's GET of the same path fails too
        self.lost: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.listing_fails and request.method == "GET" and request.url.path.endswith(self.path):
            raise httpx.ReadError("the listing failed too", request=request)
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith(self.path) and len(self.lost) < self.count:
            await response.aread()
            await response.aclose()
            self.lost.append(request.url.path)
            raise httpx.ReadTimeout("the answer was lost after the gateway received the submission", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
