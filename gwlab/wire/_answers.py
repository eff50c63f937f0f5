"""What the typed answers of chat, responses and messages share: token usage, their short repr and
notebook table, and the first step of reading a stream event. Private: each family re-exports its names."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gwlab.wire.endings import COMPLETE, FAILED, INTERRUPTED
from gwlab.wire.sse import Event, UnknownEvent


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts; `total_tokens` is the sum when the wire leaves it out (messages never sends one)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    WIRE_NAMES: ClassVar[tuple[str, str, str]] = ("input_tokens", "output_tokens", "total_tokens")

    @classmethod
    def from_wire(cls, data: Any) -> Any:
        """None when usage is absent or null (the spec allows both)."""
        if not isinstance(data, Mapping):
            return None
        given, taken, total = (integer(data.get(name)) for name in cls.WIRE_NAMES)
        if total is None and given is not None and taken is not None:
            total = given + taken
        return cls(given, taken, total, raw=dict(data))


class Answer:
    """What a responses or messages answer derives from its ordered items (output items, content blocks)
    alike: the text is that of its text items, in order; the tool calls are its call items."""

    __slots__ = ()
    ITEMS: ClassVar[str]  # the field holding the items
    TEXT_ITEM: ClassVar[type]
    CALL_ITEM: ClassVar[type]

    @property
    def text(self) -> str:
        return "".join(item.text for item in getattr(self, self.ITEMS) if isinstance(item, self.TEXT_ITEM))

    @property
    def tool_calls(self) -> list[Any]:
        return [item for item in getattr(self, self.ITEMS) if isinstance(item, self.CALL_ITEM)]


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(value: Any) -> Mapping[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage_text(usage: Usage | None) -> str:
    return "usage n/a" if usage is None else f"{usage.input_tokens} in / {usage.output_tokens} out tokens"


def summary(kind: str, **fields: Any) -> str:
    """The short repr of an answer: `text` clipped, `usage` as counts, `tool_calls` only when there are some."""
    shown = []
    for name, value in fields.items():
        if name == "tool_calls" and not value:
            continue
        text = usage_text(value) if name == "usage" else repr(clip(value) if name == "text" else value)
        shown.append(f"{name}={text}")
    return f"{kind}({', '.join(shown)})"


def items_table(caption: str, request_id: str | None, label: str, items: Iterable[Any]) -> str:
    """A table of output items or content blocks: position, type, and what `shown` makes of each."""
    return table(caption, request_id, ("#", label, "content"),
                 ((i, item.type, shown(item)) for i, item in enumerate(items)))


def shown(item: Any) -> str:
    """An item or block as a notebook shows it: its text, a call as name(arguments), else its JSON."""
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return text
    arguments = getattr(item, "arguments", None)
    if isinstance(arguments, str):
        return f"{getattr(item, 'name', None)}({arguments})"
    return raw_text(item.raw)


def table(caption: str, request_id: str | None, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An answer as a small HTML table for notebooks; the last column keeps its line breaks."""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row[:-1])
                   + f"<td style='white-space:pre-wrap'>{html.escape(str(row[-1]))}</td></tr>" for row in rows)
    title = html.escape(caption + (f" · request {request_id}" if request_id else ""))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f"<table><caption>{title}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def raw_text(raw: Mapping[str, Any]) -> str:
    """An item or block of a type without its own display: its JSON, cut short."""
    return json.dumps(dict(raw), default=str)[:200]


def payload(event: Event, events: list[Any]) -> dict[str, Any] | UnknownEvent:
    """The event's JSON object, or an UnknownEvent (kept in `events`) when its data is not one."""
    try:
        data = json.loads(event.data)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return data
    return kept(events, UnknownEvent(event.event, {"data": event.data}))


def typed_payload(event: Event, known: frozenset[str], events: list[Any]) -> dict[str, Any] | UnknownEvent:
    """`payload` with its `type` (the SSE event name when the JSON has none), unknown types kept as
    UnknownEvent: the named-event streams of responses and messages read their events this way."""
    data = payload(event, events)
    if isinstance(data, UnknownEvent):
        return data
    if not isinstance(data.get("type"), str):
        data["type"] = event.event
    if data["type"] not in known:
        return kept(events, UnknownEvent(data["type"], data))
    return data


def kept(events: list[Any], unknown: UnknownEvent) -> UnknownEvent:
    events.append(unknown)
    return unknown


def stream_status(error: Any, ended: bool, finished: bool) -> str:
    """in_progress | completed | interrupted (ended before the answer finished) | error."""
    if error is not None:
        return "error"
    if not ended:
        return "in_progress"
    return "completed" if finished else "interrupted"


class Accumulated:
    """What every text stream derives alike from its `status` and its `result()`: how it ended."""

    __slots__ = ()
    status: Any  # a str attribute or property of the family's accumulator

    def result(self) -> Any:  # pragma: no cover - each family's accumulator defines it
        raise NotImplementedError

    def _apply(self, typed: Any, data: Mapping[str, Any], handlers: Mapping[str, Callable[..., None]]) -> list[Any]:
        """Keep a typed event and let the handler of its type (a table, not a chain of branches) update
        the state; the typed event is what `add` returns."""
        self.events.append(typed)  # type: ignore[attr-defined]
        handler = handlers.get(typed.type)
        if handler is not None:
            handler(self, typed, data)
        return [typed]

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py), as far as the stream tells: a stream still open
        or cut is interrupted, whatever arrived."""
        if self.status == "error":
            return FAILED
        return INTERRUPTED if self.status in ("in_progress", "interrupted") else self.result().ending

    @property
    def complete(self) -> bool:
        """The stream reached its end marker and the model ended its answer (no cap, filter or refusal)."""
        return self.ending == COMPLETE
