"""Any asynchronous task API, driven by its description (`gwlab.TaskFamily`).

Submit once, look a lost submission up before resubmitting, poll to a terminal state, download by
Content-Type, cancel, list. `gw.videos` and `gw.images` are typed faces over this; `gw.tasks(family)`
reaches a gateway whose task API is shaped differently, with no new code.

A submission is billable, so it is never retried blindly (spec, Errors rule 2; Conventions rule 7).
The transport sends it once (it resends only when the connection never opened, which carried no byte
of the request). When the answer is lost after sending (connection cut, read timeout, overall
deadline, or a 5xx, any of which may follow an accepted submission), `submit` looks the task up before
anything else: it lists this key's recent tasks, newest first, and takes the newest one with the same
prompt and model created from `lookup_skew` seconds before the submission until now, that this client
has not already returned. Found: that task is the answer. Not found: the body is submitted once more.
If the lookup fails, or the family has no listing, the original error is raised: without a check, no
second billable task is created.

Why a listing and not an idempotency key: the spec defines no idempotency header and the task objects
have no field to carry a client token back, so prompt + model + creation time is what can be matched.
Its limit: two identical submissions racing from different clients are indistinguishable; within one
client (and within one batch, through `exclude`), ids already claimed are never matched twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping
from typing import Any

import httpx

from gwlab.client.loop import LoopThread
from gwlab.client.transport.core import AsyncTransport, Reply
from gwlab.client.transport.retry import RetryPolicy
from gwlab.errors import ConnectionFailed, GatewayError, InvalidRequest, ServerError, Timeout
from gwlab.wire.jobs.tasks import (
    ID_PARAM,
    Task,
    TaskFamily,
    TaskPage,
    build_submit,
    get_field,
    parse_page,
    parse_task,
    poll_after_seconds,
)

__all__ = ["DEFAULT_WAIT_TIMEOUT", "AsyncTasks", "Download", "Tasks"]

DEFAULT_WAIT_TIMEOUT = 600.0  # seconds for `wait` as a whole
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)  # no byte of the request left
_LOOKUP_PAGES = 5  # enough for any burst of submissions within the window; bounded all the same


class Download(bytes):
    """A downloaded file: its bytes, plus the media type the gateway declared (`media_type`)."""

    media_type: str

    def __new__(cls, data: bytes, media_type: str) -> Download:
        out = super().__new__(cls, data)
        out.media_type = media_type
        return out


class AsyncTasks:
    """One task family's client: `submit`, `get`, `wait`, `download`, `cancel`, `delete`, `list`."""

    def __init__(self, transport: AsyncTransport, family: TaskFamily, *, lookup_skew: float = 60.0,
                 lookup_delay: float = 0.5) -> None:
        if not isinstance(family, TaskFamily):
            raise InvalidRequest("family", f"a gwlab.wire.jobs.tasks.TaskFamily describing the task API; "
                                           f"got {type(family).__name__}")
        self._transport, self.family = transport, family
        self.lookup_skew = lookup_skew  # seconds of clock difference tolerated between client and gateway
        self.lookup_delay = lookup_delay  # a lost answer's submission may still be in flight: settle first
        self._returned: set[str] = set()  # ids `submit` gave out: never matched again by a lookup

    @property
    def retry(self) -> RetryPolicy:
        """The transport's retry rule, for a caller that resends a submission a 429 refused (task batches)."""
        return self._transport.retry

    def build(self, prompt: str, *, model: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The submission body for this family (validated; nothing sent)."""
        return build_submit(self.family, prompt, model, params)

    async def create(self, prompt: str, *, model: str, params: Mapping[str, Any] | None = None) -> Task:
        """Submit a task built from `prompt`, `model` and `params` (see `submit`)."""
        return await self.submit(self.build(prompt, model=model, params=params))

    async def submit(self, body: Mapping[str, Any], *, exclude: Collection[str] = ()) -> Task:
        """Submit `body` once; a submission whose answer was lost is looked up before any resubmission.

        `exclude`: task ids a lookup must not take (already claimed by other submissions)."""
        started = time.time()
        try:
            return self._returning(await self._post(body))
        except (ConnectionFailed, ServerError) as exc:
            if _never_sent(exc):
                raise
            lost = exc
        found = await self.look_up(body, since=started, exclude=exclude, lost=lost)
        if found is not None:
            return self._returning(found)
        try:
            return self._returning(await self._post(body))  # checked: not accepted, so once more
        except GatewayError as exc:
            exc.add_note(f"This was the second submission (the first was lost and no task was found); "
                         f"check {self.family.name}.list() before submitting again.")
            raise

    async def look_up(self, body: Mapping[str, Any], *, since: float, exclude: Collection[str] = (),
                      lost: GatewayError | None = None) -> Task | None:
        """The task a submission of `body` made at `since` (Unix seconds) created, if the listing shows one.

        Raises `lost` (or InvalidRequest without it) when the check cannot be made: the family has no
        listing, or listing fails. A caller must then not resubmit."""
        family = self.family
        if family.list_path is None:
            error = lost or InvalidRequest("list_path", f"the {family.name} task API has no listing")
            error.add_note(f"The submission may have been accepted, and the {family.name} task API has no "
                           "listing to check it: not resubmitted.")
            raise error
        if self.lookup_delay > 0:
            await asyncio.sleep(self.lookup_delay)
        earliest, latest = since - self.lookup_skew, time.time() + self.lookup_skew
        prompt, model = get_field(body, family.prompt_field), get_field(body, family.model_field)
        after: str | None = None
        try:
            for _ in range(_LOOKUP_PAGES):
                page = await self.list(after=after)
                for task in page.tasks:
                    if (task.id and task.id not in self._returned and task.id not in exclude
                            and _matches(task, body, prompt, model, earliest, latest)):
                        return task
                oldest = page.tasks[-1].created_at if page.tasks else None
                if (not page.has_more or not page.last_id or family.list_after_param is None
                        or (oldest is not None and oldest < earliest)):
                    return None
                after = page.last_id
        except GatewayError as exc:  # unchecked: never resubmit, report the original loss
            error = lost or exc
            error.add_note("The submission may have been accepted, and the lookup failed "
                           f"({type(exc).__name__}); check {family.name}.list() before submitting again.")
            if error is exc:
                raise
            raise error from exc
        return None

    async def get(self, task_id: str) -> Task:
        """The task as it is now."""
        return (await self.retrieve(task_id))[0]

    async def retrieve(self, task_id: str) -> tuple[Task, httpx.Headers]:
        """The task and the answer's headers (they may say when to poll next)."""
        reply: Reply = await self._transport.request("GET", self.family.item_path, family=self.family.name,
                                                     path_params={ID_PARAM: _id(task_id)})
        return parse_task(self.family, reply.body), reply.headers

    async def wait(self, task_id: str, *, poll_interval: float | None = None,
                   timeout: float = DEFAULT_WAIT_TIMEOUT) -> Task:
        """Poll until the task is terminal (completed, failed or cancelled) and return it.

        Waits `poll_interval` seconds between polls, or what the gateway's poll-after header asks (1 s
        without one). Raises `Timeout` once `timeout` seconds have passed overall; a failed task is
        returned, not raised (`task.is_failed`, `task.error_message`).
        """
        deadline = time.monotonic() + timeout
        while True:
            task, headers = await self.retrieve(task_id)
            if task.is_terminal:
                return task
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"{self.family.name} task {task_id} is still {task.status} after {timeout}s; "
                              "wait again or check later with get()", method="GET",
                              path=self.family.item_path.replace("{" + ID_PARAM + "}", task_id))
            await asyncio.sleep(min(self.pause(headers, poll_interval), left))

    def pause(self, headers: Mapping[str, str], poll_interval: float | None = None) -> float:
        """Seconds before the next poll: `poll_interval` if given, else what the gateway asked."""
        if poll_interval is not None:
            return poll_interval
        return poll_after_seconds(headers, self.family.poll_after_header)

    async def download(self, task_id: str, variant: str | None = None) -> Any:
        """A finished task's file, parsed by its Content-Type, never by guess: binary files (video,
        images) as `Download` bytes carrying `.media_type`, text as str, JSON as its value."""
        family = self.family
        query = family.content_query(variant)
        reply: Reply = await self._transport.request(
            "GET", family.content_path or "", family=family.name, path_params={ID_PARAM: _id(task_id)},
            params=query, headers={"accept": "*/*"}, expect_json=False)
        media_type = reply.headers.get("content-type", "").partition(";")[0].strip().lower()
        return Download(reply.body, media_type) if isinstance(reply.body, bytes) else reply.body

    async def cancel(self, task_id: str) -> Task:
        """Ask the gateway to cancel a task; returns the task as the gateway answered."""
        family = self.family
        if family.cancel_path is None:
            raise InvalidRequest("cancel_path", f"the {family.name} task API has no cancel path")
        reply: Reply = await self._transport.request(family.cancel_method, family.cancel_path,
                                                     family=family.name, path_params={ID_PARAM: _id(task_id)})
        return parse_task(family, reply.body)

    async def delete(self, task_id: str) -> dict[str, Any]:
        """Delete a task and its files; returns the gateway's confirmation."""
        if self.family.delete_path is None:
            raise InvalidRequest("delete_path", f"the {self.family.name} task API has no delete path")
        reply: Reply = await self._transport.request("DELETE", self.family.delete_path, family=self.family.name,
                                                     path_params={ID_PARAM: _id(task_id)})
        return dict(reply.body) if isinstance(reply.body, Mapping) else {"raw": reply.body}

    async def list(self, *, after: str | None = None, params: Mapping[str, Any] | None = None) -> TaskPage:
        """One page of this key's tasks, newest first (the family's `list_params`, then `params`)."""
        family = self.family
        if family.list_path is None:
            raise InvalidRequest("list_path", f"the {family.name} task API has no listing")
        query: dict[str, Any] = dict(family.list_params)
        if after is not None and family.list_after_param:
            query[family.list_after_param] = after
        query.update(params or {})
        return await self._transport.request("GET", family.list_path, family=family.name, params=query,
                                             parse=lambda body, _rid: parse_page(family, body))

    # -- the parts -----------------------------------------------------------------------------------

    async def _post(self, body: Mapping[str, Any]) -> Task:
        return await self._transport.request("POST", self.family.submit_path, family=self.family.name,
                                             json=body, idempotent=False,
                                             parse=lambda data, _rid: parse_task(self.family, data))

    def _returning(self, task: Task) -> Task:
        if task.id:
            self._returned.add(task.id)
        return task


def _matches(task: Task, body: Mapping[str, Any], prompt: Any, model: Any, earliest: float, latest: float) -> bool:
    if task.prompt != prompt or task.model not in (model, None):
        return False
    for name, value in body.items():  # what was asked and is echoed (seconds, size); defaults may fill the rest
        if isinstance(value, str | int | float) and task.raw.get(name) not in (value, None):
            return False
    return task.created_at is None or earliest <= task.created_at <= latest


def _never_sent(exc: GatewayError) -> bool:
    """A connection that never opened carried no byte of the request: nothing can have been accepted."""
    return isinstance(exc, ConnectionFailed) and isinstance(exc.__cause__, _NOT_SENT)


def _id(task_id: str) -> str:
    if not isinstance(task_id, str) or not task_id.strip():
        raise InvalidRequest("task_id", "required: the id of a task")
    return task_id


class Tasks:
    """The synchronous face of `AsyncTasks`."""

    def __init__(self, twin: AsyncTasks, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    @property
    def family(self) -> TaskFamily:
        return self._twin.family

    @property
    def twin(self) -> AsyncTasks:
        return self._twin

    def build(self, prompt: str, *, model: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._twin.build(prompt, model=model, params=params)

    def create(self, prompt: str, *, model: str, params: Mapping[str, Any] | None = None) -> Task:
        return self._loop.run(self._twin.create(prompt, model=model, params=params))

    def submit(self, body: Mapping[str, Any], *, exclude: Collection[str] = ()) -> Task:
        return self._loop.run(self._twin.submit(body, exclude=exclude))

    def look_up(self, body: Mapping[str, Any], *, since: float, exclude: Collection[str] = (),
                lost: GatewayError | None = None) -> Task | None:
        return self._loop.run(self._twin.look_up(body, since=since, exclude=exclude, lost=lost))

    def get(self, task_id: str) -> Task:
        return self._loop.run(self._twin.get(task_id))

    def retrieve(self, task_id: str) -> tuple[Task, httpx.Headers]:
        return self._loop.run(self._twin.retrieve(task_id))

    def wait(self, task_id: str, *, poll_interval: float | None = None,
             timeout: float = DEFAULT_WAIT_TIMEOUT) -> Task:
        return self._loop.run(self._twin.wait(task_id, poll_interval=poll_interval, timeout=timeout))

    def pause(self, headers: Mapping[str, str], poll_interval: float | None = None) -> float:
        return self._twin.pause(headers, poll_interval)

    def download(self, task_id: str, variant: str | None = None) -> Any:
        return self._loop.run(self._twin.download(task_id, variant))

    def cancel(self, task_id: str) -> Task:
        return self._loop.run(self._twin.cancel(task_id))

    def delete(self, task_id: str) -> dict[str, Any]:
        return self._loop.run(self._twin.delete(task_id))

    def list(self, *, after: str | None = None, params: Mapping[str, Any] | None = None) -> TaskPage:
        return self._loop.run(self._twin.list(after=after, params=params))
