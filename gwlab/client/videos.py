"""Video tasks (protocols.md §8): `gw.videos`, a typed face over the generic task client.

Submitting, looking a lost submission up before resubmitting, polling and downloading are the generic
task client's (`gwlab.client.tasks`, driven by `gwlab.wire.videos.VIDEOS`); this module adds the video
body's checks (seconds, size) and returns typed `VideoTask` objects.
"""

from __future__ import annotations

import io
from typing import Any

from gwlab.client.loop import LoopThread
from gwlab.client.tasks import DEFAULT_WAIT_TIMEOUT, AsyncTasks
from gwlab.client.transport.core import AsyncTransport
from gwlab.errors import GatewayError
from gwlab.wire import videos
from gwlab.wire.videos import VIDEOS, VideoList, VideoTask

__all__ = ["AsyncVideos", "Videos"]


class AsyncVideos:
    """`await gw.videos.create_and_wait(prompt, model=...)`, then `download(video.id)`."""

    def __init__(self, transport: AsyncTransport, *, lookup_skew: float = 60.0,
                 lookup_delay: float = 0.5) -> None:
        self.tasks = AsyncTasks(transport, VIDEOS, lookup_skew=lookup_skew, lookup_delay=lookup_delay)
        self._transport = transport

    async def create(self, prompt: str, *, model: str, seconds: str | int | None = None,
                     size: str | None = None, **extra: Any) -> VideoTask:
        """Submit a video; a submission whose answer was lost is looked up before any resubmission."""
        body = videos.build_create(prompt, model, seconds, size, **extra)  # refused here if invalid
        return videos.parse_video((await self.tasks.submit(body)).raw)

    async def get(self, video_id: str) -> VideoTask:
        """The task as it is now."""
        return videos.parse_video((await self.tasks.get(video_id)).raw)

    async def wait(self, video_id: str, *, poll_interval: float | None = None,
                   timeout: float = DEFAULT_WAIT_TIMEOUT) -> VideoTask:
        """Poll until the task is terminal (completed, failed or cancelled) and return it.

        Waits `poll_interval` seconds between polls, or what the gateway's `openai-poll-after-ms`
        header asks (1 s without one). Raises `Timeout` once `timeout` seconds have passed overall;
        a failed task is returned, not raised (`video.is_failed`, `video.error_message`).
        """
        task = await self.tasks.wait(video_id, poll_interval=poll_interval, timeout=timeout)
        return videos.parse_video(task.raw)

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
        data = await self.tasks.download(video_id, variant)
        if as_image and getattr(data, "media_type", "").startswith("image/"):
            from PIL import Image  # Pillow is optional: imported only when an image object is asked for

            return Image.open(io.BytesIO(data))
        return data

    async def delete(self, video_id: str) -> dict[str, Any]:
        """Delete a task and its files; returns the gateway's confirmation."""
        return await self.tasks.delete(video_id)

    async def list(self, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> VideoList:
        """One page of this key's videos."""
        return await self._transport.request("GET", VIDEOS.list_path or "", family=VIDEOS.name,
                                             params=videos.list_params(limit, order, after),
                                             parse=lambda body, _rid: videos.parse_video_list(body))


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
