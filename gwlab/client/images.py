"""Image-generation tasks: `gw.images`, a face over the generic task client (`gwlab.wire.images.IMAGES`)."""

from __future__ import annotations

import io
from typing import Any

from gwlab.client.loop import LoopThread
from gwlab.client.tasks import DEFAULT_WAIT_TIMEOUT, AsyncTasks
from gwlab.client.transport.core import AsyncTransport
from gwlab.errors import GatewayError
from gwlab.wire import images
from gwlab.wire.images import IMAGES
from gwlab.wire.jobs.tasks import Task, TaskPage
from gwlab.wire.models import DEFAULT_MODELS

__all__ = ["AsyncImages", "Images"]


class AsyncImages:
    """`await gw.images.create_and_wait(prompt)`, then `download(task.id)`: PNG bytes (or a PIL image)."""

    def __init__(self, transport: AsyncTransport, *, lookup_skew: float = 60.0, lookup_delay: float = 0.5) -> None:
        self.tasks = AsyncTasks(transport, IMAGES, lookup_skew=lookup_skew, lookup_delay=lookup_delay)

    async def create(self, prompt: str, *, model: str | None = None, size: str | None = None,
                     **extra: Any) -> Task:
        """Submit an image task (model: `DEFAULT_MODELS["images"]`); a lost answer is looked up first."""
        body = images.build_create(prompt, model or DEFAULT_MODELS["images"], size, **extra)
        return await self.tasks.submit(body)

    async def get(self, task_id: str) -> Task:
        """The task as it is now."""
        return await self.tasks.get(task_id)

    async def wait(self, task_id: str, *, poll_interval: float | None = None,
                   timeout: float = DEFAULT_WAIT_TIMEOUT) -> Task:
        """Poll until completed, failed or cancelled; `Timeout` after `timeout` seconds overall."""
        return await self.tasks.wait(task_id, poll_interval=poll_interval, timeout=timeout)

    async def create_and_wait(self, prompt: str, *, model: str | None = None, size: str | None = None,
                              poll_interval: float | None = None, timeout: float = DEFAULT_WAIT_TIMEOUT,
                              **extra: Any) -> Task:
        """`create`, then `wait` for the terminal state."""
        task = await self.create(prompt, model=model, size=size, **extra)
        if not task.id:
            raise GatewayError("the gateway answered the submission without a task id; nothing to wait for")
        return await self.wait(task.id, poll_interval=poll_interval, timeout=timeout)

    async def download(self, task_id: str, variant: str = "image", *, as_image: bool = False) -> Any:
        """The PNG (or `thumbnail`) of a completed task, by its Content-Type; a PIL image with `as_image`."""
        data = await self.tasks.download(task_id, variant)
        if as_image and getattr(data, "media_type", "").startswith("image/"):
            from PIL import Image  # Pillow is optional: imported only when an image object is asked for

            return Image.open(io.BytesIO(data))
        return data

    async def cancel(self, task_id: str) -> Task:
        """Cancel a queued or running task (a finished one stays as it is)."""
        return await self.tasks.cancel(task_id)

    async def delete(self, task_id: str) -> dict[str, Any]:
        """Delete a task and its files."""
        return await self.tasks.delete(task_id)

    async def list(self, *, after: str | None = None, limit: int | None = None) -> TaskPage:
        """One page of this key's image tasks, newest first."""
        return await self.tasks.list(after=after, params={"limit": limit} if limit is not None else None)


class Images:
    def __init__(self, twin: AsyncImages, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, prompt: str, *, model: str | None = None, size: str | None = None, **extra: Any) -> Task:
        return self._loop.run(self._twin.create(prompt, model=model, size=size, **extra))

    def get(self, task_id: str) -> Task:
        return self._loop.run(self._twin.get(task_id))

    def wait(self, task_id: str, *, poll_interval: float | None = None,
             timeout: float = DEFAULT_WAIT_TIMEOUT) -> Task:
        return self._loop.run(self._twin.wait(task_id, poll_interval=poll_interval, timeout=timeout))

    def create_and_wait(self, prompt: str, *, model: str | None = None, size: str | None = None,
                        poll_interval: float | None = None, timeout: float = DEFAULT_WAIT_TIMEOUT,
                        **extra: Any) -> Task:
        return self._loop.run(self._twin.create_and_wait(prompt, model=model, size=size,
                                                         poll_interval=poll_interval, timeout=timeout, **extra))

    def download(self, task_id: str, variant: str = "image", *, as_image: bool = False) -> Any:
        return self._loop.run(self._twin.download(task_id, variant, as_image=as_image))

    def cancel(self, task_id: str) -> Task:
        return self._loop.run(self._twin.cancel(task_id))

    def delete(self, task_id: str) -> dict[str, Any]:
        return self._loop.run(self._twin.delete(task_id))

    def list(self, *, after: str | None = None, limit: int | None = None) -> TaskPage:
        return self._loop.run(self._twin.list(after=after, limit=limit))
