"""Asynchronous video tasks (protocols.md §8): submit, look up, poll to a terminal state, download.

A submission is billable, so it is never retried blindly (spec, Errors rule 2; Conventions rule 7).
The transport sends `POST /videos` once (it resends only when the connection never opened, which
carried no byte of the request). When the answer is lost after sending (connection cut, read
timeout, overall deadline, or a 5xx, any of which may follow an accepted submission), `create` looks
the task up before anything else: it lists this key's recent videos, newest first, and takes the
newest one with the same prompt and model created from `lookup_skew` seconds before the submission
until now, that this client has not already returned. Found: that task is the answer, nothing is
resubmitted. Not found: the body is submitted once more. If the lookup itself fails, the original
error is raised: without a check, no second billable task is created.

Why a listing and not an idempotency key: the spec defines no idempotency header and the video
object has no field to carry a client token back, so prompt + model + creation time is what can be
matched. Its limit: two identical submissions racing from different clients are indistinguishable;
within one client, ids already returned are never matched twice.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Mapping
from typing import Any

import httpx

from gwlab.client._loop import LoopThread
from gwlab.client.transport import AsyncTransport, Reply
from gwlab.errors import ConnectionFailed, GatewayError, InvalidRequest, ServerError, Timeout
from gwlab.wire import tasks
from gwlab.wire.tasks import VideoList, VideoTask

__all__ = ["AsyncVideos", "Videos"]

PATH = "/videos"
ITEM = "/videos/{video_id}"
DEFAULT_WAIT_TIMEOUT = 600.0  # seconds for `wait` as a whole
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)  # no byte of the request left
_LOOKUP_PAGE = 100
_LOOKUP_PAGES = 5  # enough for any burst of submissions within the window; bounded all the same


class AsyncVideos:
    """`await gw.videos.create_and_wait(prompt, model=...)`, then `download(video.id)`."""

    def __init__(self, transport: AsyncTransport, *, lookup_skew: float = 60.0,
                 lookup_delay: float = 0.5) -> None:
        self._transport = transport
        self.lookup_skew = lookup_skew  # seconds of clock difference tolerated between client and gateway
        self.lookup_delay = lookup_delay  # a lost answer's submission may still be in flight: settle first
        self._returned: set[str] = set()  # ids `create` gave out: never matched again by a lookup

    async def create(self, prompt: str, *, model: str, seconds: str | int | None = None,
                     size: str | None = None, **extra: Any) -> VideoTask:
        """Submit a video; a submission whose answer was lost is looked up before any resubmission."""
        body = tasks.build_create(prompt, model, seconds, size, **extra)  # refused here if invalid
        started = time.time()
        try:
            return self._returning(await self._submit(body))
        except (ConnectionFailed, ServerError) as exc:
            if _never_sent(exc):
                raise
            lost = exc
        found = await self._look_up(body, started, lost)
        if found is not None:
            return self._returning(found)
        try:
            return self._returning(await self._submit(body))  # checked: not accepted, so once more
        except GatewayError as exc:
            exc.add_note("This was the second submission (the first was lost and no task was found); "
                         "check gw.videos.list() before submitting again.")
            raise

    async def get(self, video_id: str) -> VideoTask:
        """The task as it is now."""
        return (await self._retrieve(video_id))[0]

    async def wait(self, video_id: str, *, poll_interval: float | None = None,
                   timeout: float = DEFAULT_WAIT_TIMEOUT) -> VideoTask:
        """Poll until the task is terminal (completed, failed or cancelled) and return it.

        Waits `poll_interval` seconds between polls, or what the gateway's `openai-poll-after-ms`
        header asks (1 s without one). Raises `Timeout` once `timeout` seconds have passed overall;
        a failed task is returned, not raised (`video.is_failed`, `video.error_message`).
        """
        deadline = time.monotonic() + timeout
        while True:
            video, headers = await self._retrieve(video_id)
            if video.is_terminal:
                return video
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"video {video_id} is still {video.status} ({video.progress}%) after "
                              f"{timeout}s; wait again or check later with get()", method="GET",
                              path=f"{PATH}/{video_id}")
            pause = poll_interval if poll_interval is not None else tasks.poll_after_seconds(headers)
            await asyncio.sleep(min(pause, left))

    async def create_and_wait(self, prompt: str, *, model: str, seconds: str | int | None = None,
                              size: str | None = None, poll_interval: float | None = None,
                              timeout: float = DEFAULT_WAIT_TIMEOUT, **extra: Any) -> VideoTask:
        """`create`, then `wait` for the terminal state."""
        video = await self.create(prompt, model=model, seconds=seconds, size=size, **extra)
        if not video.id:
            raise GatewayError("the gateway answered the submission without a video id; nothing to wait for")
        return await self.wait(video.id, poll_interval=poll_interval, timeout=timeout)

    async def download(self, video_id: str, variant: str = "video", *, as_image: bool = False) -> Any:
        """A finished task's file, parsed by its Content-Type: video (and other binaries) as bytes,
        images as bytes or, with `as_image=True`, a PIL image; JSON as a dict."""
        reply: Reply = await self._transport.request(
            "GET", ITEM + "/content", family="videos", path_params={"video_id": _id(video_id)},
            params=tasks.content_params(variant), headers={"accept": "*/*"}, expect_json=False)
        media_type = reply.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type.startswith("image/") and as_image:
            from PIL import Image  # Pillow is optional: imported only when an image object is asked for

            return Image.open(io.BytesIO(reply.body))
        return reply.body  # the transport parsed it by Content-Type: JSON value, text, or bytes

    async def delete(self, video_id: str) -> dict[str, Any]:
        """Delete a task and its files; returns the gateway's confirmation."""
        reply: Reply = await self._transport.request("DELETE", ITEM, family="videos",
                                                     path_params={"video_id": _id(video_id)})
        return dict(reply.body) if isinstance(reply.body, Mapping) else {"raw": reply.body}

    async def list(self, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> VideoList:
        """One page of this key's videos."""
        return await self._transport.request("GET", PATH, family="videos",
                                             params=tasks.list_params(limit, order, after),
                                             parse=lambda body, _rid: tasks.parse_video_list(body))

    # -- the parts -----------------------------------------------------------------------------------

    async def _submit(self, body: dict[str, Any]) -> VideoTask:
        return await self._transport.request("POST", PATH, family="videos", json=body, idempotent=False,
                                             parse=lambda data, _rid: tasks.parse_video(data))

    async def _retrieve(self, video_id: str) -> tuple[VideoTask, httpx.Headers]:
        reply: Reply = await self._transport.request("GET", ITEM, family="videos",
                                                     path_params={"video_id": _id(video_id)})
        return tasks.parse_video(reply.body), reply.headers

    async def _look_up(self, body: Mapping[str, Any], started: float, lost: GatewayError) -> VideoTask | None:
        """The task a lost submission created, if any (see the module docstring)."""
        if self.lookup_delay > 0:
            await asyncio.sleep(self.lookup_delay)
        earliest = started - self.lookup_skew
        latest = time.time() + self.lookup_skew
        after: str | None = None
        try:
            for _ in range(_LOOKUP_PAGES):
                page = await self.list(limit=_LOOKUP_PAGE, order="desc", after=after)
                for video in page.data:
                    if _matches(video, body, earliest, latest) and video.id not in self._returned:
                        return video
                oldest = page.data[-1].created_at if page.data else None
                if not page.has_more or not page.last_id or (oldest is not None and oldest < earliest):
                    return None
                after = page.last_id
        except GatewayError as exc:  # unchecked: never resubmit, report the original loss
            lost.add_note("The submission may have been accepted, and the lookup failed "
                          f"({type(exc).__name__}); check gw.videos.list() before submitting again.")
            raise lost from exc
        return None

    def _returning(self, video: VideoTask) -> VideoTask:
        if video.id:
            self._returned.add(video.id)
        return video


def _matches(video: VideoTask, body: Mapping[str, Any], earliest: float, latest: float) -> bool:
    if video.prompt != body["prompt"] or video.model not in (body["model"], None):
        return False
    for name in ("seconds", "size"):  # only what was asked; the gateway fills defaults for the rest
        if name in body and getattr(video, name) not in (body[name], None):
            return False
    return video.created_at is None or earliest <= _seconds(video.created_at) <= latest


def _seconds(value: float) -> float:
    """Unix seconds, also from a gateway that sends milliseconds (spec, response rule 4)."""
    return value / 1000 if value > 1e11 else value


def _never_sent(exc: GatewayError) -> bool:
    """A connection that never opened carried no byte of the request: nothing can have been accepted."""
    return isinstance(exc, ConnectionFailed) and isinstance(exc.__cause__, _NOT_SENT)


def _id(video_id: str) -> str:
    if not isinstance(video_id, str) or not video_id.strip():
        raise InvalidRequest("video_id", "required: the id of a video task")
    return video_id


class Videos:
    def __init__(self, twin: AsyncVideos, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, prompt: str, *, model: str, seconds: str | int | None = None, size: str | None = None,
               **extra: Any) -> VideoTask:
        return self._loop.run(self._twin.create(prompt, model=model, seconds=seconds, size=size, **extra))

    def get(self, video_id: str) -> VideoTask:
        return self._loop.run(self._twin.get(video_id))

    def wait(self, video_id: str, *, poll_interval: float | None = None,
             timeout: float = DEFAULT_WAIT_TIMEOUT) -> VideoTask:
        return self._loop.run(self._twin.wait(video_id, poll_interval=poll_interval, timeout=timeout))

    def create_and_wait(self, prompt: str, *, model: str, seconds: str | int | None = None,
                        size: str | None = None, poll_interval: float | None = None,
                        timeout: float = DEFAULT_WAIT_TIMEOUT, **extra: Any) -> VideoTask:
        return self._loop.run(self._twin.create_and_wait(
            prompt, model=model, seconds=seconds, size=size, poll_interval=poll_interval, timeout=timeout,
            **extra))

    def download(self, video_id: str, variant: str = "video", *, as_image: bool = False) -> Any:
        return self._loop.run(self._twin.download(video_id, variant, as_image=as_image))

    def delete(self, video_id: str) -> dict[str, Any]:
        return self._loop.run(self._twin.delete(video_id))

    def list(self, *, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> VideoList:
        return self._loop.run(self._twin.list(limit=limit, order=order, after=after))
