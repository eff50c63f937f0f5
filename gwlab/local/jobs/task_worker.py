"""What the local task routes share: the render worker, task ids, poll headers, listing pages.

A submission is stored as a task (status queued) and rendered by one background worker thread per
family, which moves it to in_progress with progress 0..100 and then to completed, failed or cancelled.
Every change is written to SQLite, so a restarted gateway resumes the tasks it had not finished.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.responses import Response

from gwlab.local.errors import APIError
from gwlab.local.store import Store
from gwlab.wire.limits import VIDEO_POLL_AFTER_HEADER

TERMINAL = ("completed", "failed", "cancelled")
Files = Mapping[str, tuple[str, bytes]]  # variant -> (media type, bytes)
# render(task id, task body, on_step) -> the files; on_step(progress) returns False to stop
Render = Callable[[str, dict[str, Any], Callable[[int], bool]], Files]


class RendererUnavailable(RuntimeError):
    """A library the preview renderer needs (Pillow, PyAV: the `local` extra) is not installed."""


class Cancelled(Exception):
    """The task was cancelled or deleted, or the gateway is shutting down: stop rendering."""


class TaskWorker:
    """Renders one family's queued tasks one at a time on a daemon thread, pacing progress for pollers.

    Cancelling, deleting and shutting down race with rendering; `_lock` makes "still wanted?" and
    "write" one step, so a cancelled or deleted task is never written back and a stopped render leaves
    its task resumable."""

    def __init__(self, store: Store, kind: str, render: Render, pace: float) -> None:
        self.store, self.kind, self.render, self.pace = store, kind, render, pace
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._gone: set[str] = set()  # cancelled or deleted: never written by the render again
        self._thread = threading.Thread(target=self._run, name=f"gwlab-{kind}-render", daemon=True)

    def start(self) -> None:
        """Start the thread and queue what an earlier run left unfinished, oldest first."""
        unfinished = [t for t in self.store.unfinished_tasks() if t[2].get("object") == self.kind]
        for task_id, key_id, _ in sorted(unfinished, key=lambda t: (t[2].get("created_at", 0), t[0])):
            self._queue.put((task_id, key_id))
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current step; an interrupted task stays in_progress and resumes next start."""
        self._stop.set()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def submit(self, task_id: str, key_id: int) -> None:
        self._queue.put((task_id, key_id))

    def delete(self, task_id: str, key_id: int) -> bool:
        with self._lock:
            self._gone.add(task_id)
            return self.store.delete_task(task_id, key_id)

    def cancel(self, task_id: str, key_id: int) -> dict[str, Any] | None:
        """Cancel a queued or running task; a terminal one is returned as it is (None: no such task)."""
        with self._lock:
            task = self.store.load_task(task_id, key_id)
            if task is None or task.get("status") in TERMINAL:
                return task
            self._gone.add(task_id)
            task.update(status="cancelled", cancelled_at=int(time.time()))
            self.store.save_task(task_id, key_id, self.kind, task)
            return task

    def _update(self, task_id: str, key_id: int, task: dict[str, Any], **changes: Any) -> bool:
        with self._lock:
            if task_id in self._gone:
                return False
            task.update(changes)
            self.store.save_task(task_id, key_id, self.kind, task)
            return True

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self._queue.get()
            if item is None:
                return
            try:
                self._render(*item)
            except Exception as exc:  # a broken task must not end the worker
                self._fail(*item, "render_failed", f"The preview renderer failed: {exc}")

    def _fail(self, task_id: str, key_id: int, code: str, message: str) -> None:
        task = self.store.load_task(task_id, key_id)
        if task is not None:
            self._update(task_id, key_id, task, status="failed", error={"code": code, "message": message})

    def _render(self, task_id: str, key_id: int) -> None:
        task = self.store.load_task(task_id, key_id)
        if task is None or task.get("status") in TERMINAL:
            return
        done = int(task.get("progress") or 0)  # a resumed render never shows progress going back
        if not self._update(task_id, key_id, task, status="in_progress", progress=done):
            return

        def on_step(progress: int) -> bool:
            if self._stop.wait(self.pace):
                return False
            return self._update(task_id, key_id, task, progress=max(progress, task["progress"]))

        try:
            files = self.render(task_id, task, on_step)
        except Cancelled:
            return
        except ImportError as exc:  # Pillow and PyAV come with the `local` extra
            self._fail(task_id, key_id, "renderer_unavailable",
                       f"The preview renderer needs {exc.name}: pip install 'gwlab[local]'")
            return
        except RendererUnavailable as exc:
            self._fail(task_id, key_id, "renderer_unavailable", str(exc))
            return
        with self._lock:  # the files first, then the status: "completed" always means downloadable
            if task_id in self._gone:
                return
            for variant, (media_type, data) in files.items():
                self.store.save_content(task_id, variant, media_type, data)
        self._update(task_id, key_id, task, status="completed", progress=100, completed_at=int(time.time()))


def load(request: Any, key_id: int, task_id: str, *, kind: str, noun: str, code: str, param: str) -> dict[str, Any]:
    """This key's task of this kind, or a 404 `{code}_not_found`; its model goes to the request log."""
    task: dict[str, Any] | None = request.app.state.store.load_task(task_id, key_id)
    if task is None or task.get("object") != kind:
        raise APIError(404, f"No {noun} with id '{task_id}'", code=f"{code}_not_found", param=param)
    request.state.model = task.get("model")
    return task


def new_id(prefix: str) -> str:
    """Time-ordered ids (creation time in hex, then randomness), so listings sort by creation."""
    return f"{prefix}{time.time_ns():016x}{secrets.token_hex(6)}"


def poll_headers(pace: float, task: Mapping[str, Any]) -> dict[str, str]:
    """`openai-poll-after-ms` while the task runs: pollers wait one render step, not a full second."""
    if task["status"] in TERMINAL:
        return {}
    return {VIDEO_POLL_AFTER_HEADER: str(max(100, min(int(pace * 1000), 1000)))}


def cursor_slice(ordered: list[dict[str, Any]], limit: int, after: str | None, before: str | None = None,
                 *, noun: str | None = None) -> tuple[list[dict[str, Any]], bool]:
    """(the page, whether more follow) of an ordered listing, after or before an id. An unknown `after`
    is a 400 naming `noun` (OpenAI's listings), or an empty page when `noun` is None (Anthropic's)."""
    ids = [t["id"] for t in ordered]
    if after is not None:
        if after not in ids and noun is not None:
            raise APIError(400, f"'after' names no {noun} of this key: '{after}'", param="after")
        ordered = ordered[ids.index(after) + 1:] if after in ids else []
    elif before is not None:
        ordered = ordered[:ids.index(before)][-limit:] if before in ids else []
    return ordered[:limit], len(ordered) > limit


def page(tasks: list[dict[str, Any]], limit: int, order: str, after: str | None, noun: str) -> dict[str, Any]:
    """One page of a listing in OpenAI's list shape, ordered by creation (`desc`: newest first)."""
    ordered = sorted(tasks, key=lambda t: (t["created_at"], t["id"]), reverse=order == "desc")
    chosen, more = cursor_slice(ordered, limit, after, noun=noun)
    return {"object": "list", "data": chosen, "first_id": chosen[0]["id"] if chosen else None,
            "last_id": chosen[-1]["id"] if chosen else None, "has_more": more}


def content(store: Store, task: Mapping[str, Any], variant: str, *, noun: str, code: str, param: str,
            filename: str) -> Response:
    """A completed task's file. Otherwise a 404 (never a 409: the SDKs retry 409, protocols.md section 5)
    coded `{code}_failed`, `{code}_cancelled` or `{code}_not_ready`."""
    task_id, status = task["id"], task["status"]
    if status in ("failed", "cancelled"):
        reason = f": {task['error']['message']}" if task.get("error") else ""
        raise APIError(404, f"The {noun} '{task_id}' is {status} and has no content{reason}",
                       code=f"{code}_{status}", param=param)
    found = store.load_content(task_id, variant)
    if status != "completed" or found is None:
        raise APIError(404, f"The {noun} '{task_id}' is {status} ({task['progress']}%); its content can be "
                       "downloaded once its status is completed", code=f"{code}_not_ready", param=param)
    media_type, data = found
    return Response(data, media_type=media_type, headers={"content-disposition": f'inline; filename="{filename}"'})
