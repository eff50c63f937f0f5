"""Video tasks (protocols.md §8): the `VIDEOS` description, the create body, a typed video object.

Strict writer: a submission is billable, so `build_create` refuses a bad prompt, duration or size here,
before anything is sent, and omits unset options (spec, Conventions rule 2). Tolerant reader:
`parse_video` types the fields of the video object and keeps everything it was sent in `raw`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire.jobs import tasks
from gwlab.wire.jobs.tasks import _is_number, _str  # one reading of a loose field, shared by the task families
from gwlab.wire.limits import (
    LIST_ORDERS,
    TASK_CANCELLED_STATUSES,
    VIDEO_DEFAULT_VARIANT,
    VIDEO_LIST_LIMIT_RANGE,
    VIDEO_POLL_AFTER_HEADER,
    VIDEO_POLL_DEFAULT_SECONDS,
    VIDEO_SECONDS,
    VIDEO_SIZES,
    VIDEO_TERMINAL,
    VIDEO_VARIANTS,
)

__all__ = [
    "VIDEOS",
    "VideoList",
    "VideoTask",
    "build_create",
    "build_remix",
    "content_params",
    "is_completed",
    "is_terminal",
    "list_params",
    "parse_video",
    "parse_video_list",
    "poll_after_seconds",
]


# OpenAI's videos API as a task family: what the generic task client and `df.gw.videos` drive
VIDEOS = tasks.TaskFamily(
    name="videos", submit_path="/videos", item_path="/videos/{task_id}",
    content_path="/videos/{task_id}/content", variants=VIDEO_VARIANTS, thumbnail_variant="thumbnail",
    list_path="/videos", delete_path="/videos/{task_id}", cancel_path=None,
    completed=("completed",), failed=("failed",), cancelled=TASK_CANCELLED_STATUSES)


# --- requests -------------------------------------------------------------------------------------------


def build_create(
    prompt: str, model: str, seconds: str | int | None = None, size: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The body of `POST /videos`; `seconds` may be given as 4, 8 or 12 and is sent as a string."""
    body: dict[str, Any] = {"prompt": _text(prompt, "prompt"), "model": _text(model, "model")}
    if seconds is not None:
        duration = str(seconds) if isinstance(seconds, int) and not isinstance(seconds, bool) else seconds
        body["seconds"] = tasks.one_of(duration, VIDEO_SECONDS, "seconds", given=seconds)
    if size is not None:
        body["size"] = tasks.one_of(size, VIDEO_SIZES, "size")
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


def build_remix(prompt: Any) -> dict[str, Any]:
    """The body of `POST /videos/{id}/remix`; any value is checked (the gateway passes the body's as sent)."""
    return {"prompt": _text(prompt, "prompt")}


def content_params(variant: str = VIDEO_DEFAULT_VARIANT) -> dict[str, str]:
    """Query parameters of `GET /videos/{id}/content`: which file to download."""
    return {"variant": tasks.one_of(variant, VIDEO_VARIANTS, "variant")}


def list_params(
    limit: int | None = None, order: str | None = None, after: str | None = None
) -> dict[str, Any]:
    """Query parameters of `GET /videos`, unset ones omitted."""
    params: dict[str, Any] = {}
    if limit is not None:
        low, high = VIDEO_LIST_LIMIT_RANGE
        if isinstance(limit, bool) or not isinstance(limit, int) or not low <= limit <= high:
            raise InvalidRequest("limit", f"must be an integer from {low} to {high}; got {limit!r}")
        params["limit"] = limit
    if order is not None:
        params["order"] = tasks.one_of(order, LIST_ORDERS, "order")
    if after is not None:
        params["after"] = _text(after, "after")
    return params


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(name, "must be a non-empty string")
    return value


# --- statuses -------------------------------------------------------------------------------------------


def is_terminal(status: str | None) -> bool:
    """Whether polling can stop: completed, failed, or cancelled (spec, Conventions rule 7)."""
    return status in VIDEO_TERMINAL or status in TASK_CANCELLED_STATUSES


def is_completed(status: str | None) -> bool:
    """Whether the result can be downloaded."""
    return status == "completed"


def poll_after_seconds(headers: Mapping[str, str], default: float = VIDEO_POLL_DEFAULT_SECONDS) -> float:
    """How long to wait before the next poll: the `openai-poll-after-ms` header, else `default`."""
    return tasks.poll_after_seconds(headers, VIDEO_POLL_AFTER_HEADER, default)


# --- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VideoTask:
    """A video object; `raw` keeps every field the gateway sent, known or not."""

    id: str | None = None
    status: str | None = None
    progress: int | None = None
    model: str | None = None
    prompt: str | None = field(default=None, repr=False)  # may be long: kept out of the repr
    size: str | None = None
    seconds: str | None = None
    created_at: float | None = None
    completed_at: float | None = None
    expires_at: float | None = None
    remixed_from_video_id: str | None = None
    error: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.status)

    @property
    def is_completed(self) -> bool:
        return is_completed(self.status)

    @property
    def is_failed(self) -> bool:
        return self.status == "failed"

    @property
    def error_message(self) -> str | None:
        """The failure's message (or code) when there is one."""
        return tasks.error_text(self.error)


def parse_video(data: Any) -> VideoTask:
    """A typed video object; values of an unexpected type read as None, the originals stay in `raw`."""
    if not isinstance(data, Mapping):
        return VideoTask(raw={})
    seconds = data.get("seconds")
    progress = data.get("progress")
    error = data.get("error")
    return VideoTask(
        id=_str(data.get("id")), status=_str(data.get("status")),
        progress=int(progress) if _is_number(progress) else None,
        model=_str(data.get("model")), prompt=_str(data.get("prompt")), size=_str(data.get("size")),
        seconds=f"{seconds:g}" if _is_number(seconds) else _str(seconds),  # some gateways send 4, not "4"
        created_at=_time(data.get("created_at")), completed_at=_time(data.get("completed_at")),
        expires_at=_time(data.get("expires_at")),
        remixed_from_video_id=_str(data.get("remixed_from_video_id")),
        error=dict(error) if isinstance(error, Mapping) else None,
        raw=dict(data),
    )


@dataclass(frozen=True, slots=True)
class VideoList:
    """One page of `GET /videos`."""

    data: list[VideoTask]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


def parse_video_list(data: Any) -> VideoList:
    body = data if isinstance(data, Mapping) else {}
    items = got if isinstance(got := body.get("data"), list) else []
    return VideoList([parse_video(item) for item in items], _str(body.get("first_id")),
                     _str(body.get("last_id")), body.get("has_more") is True, dict(body))


def _time(value: Any) -> float | None:
    """Unix time as sent (seconds here; the spec allows other forms per endpoint: kept in `raw`)."""
    return value if _is_number(value) else None
