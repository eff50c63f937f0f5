"""Asynchronous task APIs described by data (spec, Conventions rule 7): submit, retrieve, list, content.

The spec leaves the paths, bodies and status values of task APIs open, so gateways differ. A
`TaskFamily` is the whole difference written as data: where to submit, where a task is read (the
path with `{task_id}`), which fields hold the id, status, progress, error and creation time (dotted
paths such as `output.task_id` reach into nested objects), which statuses are terminal and what each
means, where the result is downloaded and in which variants. Videos (`gwlab.wire.videos.VIDEOS`) and
images (`gwlab.wire.images.IMAGES`) are two descriptions; a third gateway is reached by a third
description, not new code. Everything here is pure: the client does the I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from gwlab.errors import InvalidRequest
from gwlab.wire.limits import TASK_CANCELLED_STATUSES, VIDEO_POLL_AFTER_HEADER, VIDEO_POLL_DEFAULT_SECONDS

__all__ = ["TASK_STATES", "Task", "TaskFamily", "TaskPage", "build_submit", "get_field", "parse_page",
           "parse_task", "poll_after_seconds"]

# what every family's statuses are read as: queued, running, or one of the three terminal states
TASK_STATES = ("queued", "in_progress", "completed", "failed", "cancelled")
ID_PARAM = "task_id"  # the placeholder of a task's id in a family's paths


@dataclass(frozen=True, slots=True)
class TaskFamily:
    """One task API, described: paths relative to the base URL, field names, status values.

    Paths hold `{task_id}` where the id goes (URL-encoded when sent). A family without `list_path`
    cannot look a lost submission up, so such a loss is reported, never resubmitted.
    """

    name: str  # ledger label and error text: "videos", "images"
    submit_path: str  # POST a submission here
    item_path: str  # GET a task: "/videos/{task_id}"
    content_path: str | None = None  # GET a result file: "/videos/{task_id}/content"
    variant_param: str | None = "variant"  # the query parameter choosing a file (None: one file only)
    variants: tuple[str, ...] = ()  # files a completed task offers; the first is the main result
    thumbnail_variant: str | None = None  # a small image of the result, for previews
    list_path: str | None = None  # GET this key's tasks, newest first (for lookups)
    cancel_path: str | None = None  # cancel a task: "/images/tasks/{task_id}/cancel"
    cancel_method: str = "POST"
    delete_path: str | None = None  # DELETE a task and its files
    id_field: str = "id"
    status_field: str = "status"
    progress_field: str | None = "progress"
    error_field: str | None = "error"
    created_field: str | None = "created_at"
    prompt_field: str = "prompt"  # where the prompt goes in a submission, and is echoed in a task
    model_field: str = "model"
    queued: tuple[str, ...] = ("queued",)
    completed: tuple[str, ...] = ("completed",)
    failed: tuple[str, ...] = ("failed",)
    cancelled: tuple[str, ...] = TASK_CANCELLED_STATUSES
    # the listing: where its items are, how to ask for the next page and for newest first
    list_items_field: str = "data"
    list_last_id_field: str | None = "last_id"
    list_has_more_field: str | None = "has_more"
    list_after_param: str | None = "after"
    list_params: tuple[tuple[str, str], ...] = (("order", "desc"), ("limit", "100"))
    poll_after_header: str | None = VIDEO_POLL_AFTER_HEADER  # milliseconds to wait, when the gateway says

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidRequest("name", "a task family needs a non-empty name")
        for name in ("submit_path", "item_path", "content_path", "list_path", "cancel_path", "delete_path"):
            path = getattr(self, name)
            if path is not None and (not isinstance(path, str) or not path.startswith("/")):
                raise InvalidRequest(name, f"must be a path starting with '/', relative to the base URL; "
                                           f"got {path!r}")
        for name in ("item_path", "content_path", "cancel_path", "delete_path"):
            path = getattr(self, name)
            if path is not None and "{" + ID_PARAM + "}" not in path:
                raise InvalidRequest(name, f"must hold '{{{ID_PARAM}}}' where the task id goes; got {path!r}")
        if self.cancel_method not in ("POST", "DELETE", "PUT"):
            raise InvalidRequest("cancel_method", f"must be POST, DELETE or PUT; got {self.cancel_method!r}")
        if not self.completed:
            raise InvalidRequest("completed", "name at least one status that means the task succeeded")

    def state(self, status: str | None) -> str | None:
        """The status as one of `TASK_STATES` (a non-terminal status not listed reads as in_progress)."""
        if status is None:
            return None
        for state, values in (("completed", self.completed), ("failed", self.failed),
                              ("cancelled", self.cancelled), ("queued", self.queued)):
            if status in values:
                return state
        return "in_progress"

    @property
    def main_variant(self) -> str | None:
        return self.variants[0] if self.variants else None

    def content_query(self, variant: str | None = None) -> dict[str, str]:
        """Query parameters of a download; InvalidRequest naming `variant` for one the family lacks."""
        if self.content_path is None:
            raise InvalidRequest("content_path", f"the {self.name} task API has no download path")
        chosen = variant or self.main_variant
        if chosen is None or self.variant_param is None:
            return {}
        if self.variants and chosen not in self.variants:
            raise InvalidRequest("variant", f"must be one of {', '.join(self.variants)}; got {variant!r}")
        return {self.variant_param: chosen}


@dataclass(frozen=True, slots=True)
class Task:
    """A task as a family's gateway sent it: typed where the description says, everything kept in `raw`."""

    id: str | None = None
    status: str | None = None  # as sent
    state: str | None = None  # as read: one of TASK_STATES
    progress: float | None = None
    created_at: float | None = None  # Unix seconds (milliseconds are converted)
    error: Any = None
    prompt: str | None = field(default=None, repr=False)
    model: str | None = None
    family: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_terminal(self) -> bool:
        return self.state in ("completed", "failed", "cancelled")

    @property
    def is_completed(self) -> bool:
        return self.state == "completed"

    @property
    def is_failed(self) -> bool:
        return self.state == "failed"

    @property
    def is_cancelled(self) -> bool:
        return self.state == "cancelled"

    @property
    def error_message(self) -> str | None:
        """The failure's message (or code) when there is one."""
        return error_text(self.error)


def one_of(value: Any, allowed: tuple[str, ...], field_name: str, *, given: Any = None) -> str:
    """`value` when it is one of `allowed`, else InvalidRequest naming the field and the choices (and what
    the caller gave, `given`, when `value` is its normalized form: 5 stays 5, not '5')."""
    if not isinstance(value, str) or value not in allowed:
        shown = value if given is None else given
        raise InvalidRequest(field_name, f"must be one of {', '.join(allowed)}; got {shown!r}")
    return value


def error_text(error: Any) -> str | None:
    """A task's error as one line: its message, else its code, else the object; None without one."""
    if not error:
        return None
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("code") or dict(error))
    return str(error)


def get_field(data: Any, path: str | None) -> Any:
    """The value at a dotted path (`output.task_id`), or None where any step is missing."""
    if path is None:
        return None
    for part in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def _put_field(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        body = body.setdefault(part, {})
        if not isinstance(body, dict):
            raise InvalidRequest(path, f"'{part}' is both a value and an object in this submission")
    body[last] = value


def build_submit(family: TaskFamily, prompt: str, model: str,
                 params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A submission: prompt and model at the family's fields (dotted paths nest), then `params` (dotted
    keys nest too); unset (None) parameters are omitted (spec, Conventions rule 2)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidRequest("prompt", "must be a non-empty string")
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("model", "must be a non-empty string")
    body: dict[str, Any] = {}
    _put_field(body, family.model_field, model)
    _put_field(body, family.prompt_field, prompt)
    for name, value in (params or {}).items():
        if value is not None:
            _put_field(body, name, value)
    return body


def parse_task(family: TaskFamily, data: Any) -> Task:
    """A typed task; fields of an unexpected type read as None, the originals stay in `raw`."""
    if not isinstance(data, Mapping):
        return Task(family=family.name, raw={})
    status = _str(get_field(data, family.status_field))
    progress = get_field(data, family.progress_field)
    return Task(
        id=_str(get_field(data, family.id_field)), status=status, state=family.state(status),
        progress=float(progress) if _is_number(progress) else None,
        created_at=_seconds(get_field(data, family.created_field)),
        error=get_field(data, family.error_field) or None,
        prompt=_str(get_field(data, family.prompt_field)), model=_str(get_field(data, family.model_field)),
        family=family.name, raw=dict(data))


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of a family's listing."""

    tasks: list[Task]
    last_id: str | None = None
    has_more: bool = False


def parse_page(family: TaskFamily, data: Any) -> TaskPage:
    items = get_field(data, family.list_items_field)
    tasks = [parse_task(family, item) for item in items] if isinstance(items, list) else []
    last_id = _str(get_field(data, family.list_last_id_field)) or (tasks[-1].id if tasks else None)
    return TaskPage(tasks, last_id, get_field(data, family.list_has_more_field) is True)


def poll_after_seconds(headers: Mapping[str, str], name: str | None = VIDEO_POLL_AFTER_HEADER,
                       default: float = VIDEO_POLL_DEFAULT_SECONDS) -> float:
    """How long to wait before the next poll: the gateway's milliseconds header `name`, else `default`."""
    if name is None:
        return default
    for key, value in headers.items():
        if key.lower() == name:
            try:
                millis = float(value)
            except (TypeError, ValueError):
                return default
            return millis / 1000 if millis >= 0 else default  # NaN fails the test too
    return default


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _seconds(value: Any) -> float | None:
    """Unix seconds, also from a gateway that sends milliseconds (spec, response rule 4)."""
    if not _is_number(value):
        return None
    return value / 1000 if value > 1e11 else float(value)
