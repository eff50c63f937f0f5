"""What the typed answers of chat, responses and messages share: token usage, their short repr and
notebook table, and the first step of reading a stream event. Private: each family re-exports its names."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

from gwlab.wire.endings import COMPLETE, FAILED, INTERRUPTED
from gwlab.wire.sse import Event, UnknownEvent

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., None])


@dataclass(frozen=True, slots=True)
class Kept:
    """Base of every typed answer, item, block and event of the text families: whatever the gateway sent
    stays in `raw` (tolerant reader). Keyword-only, so each subclass lists only its own fields."""

    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Usage(Kept):
    """Token counts; `total_tokens` is the sum when the wire leaves it out (messages never sends one)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    WIRE_NAMES: ClassVar[tuple[str, str, str]] = ("input_tokens", "output_tokens", "total_tokens")

    @classmethod
    def from_wire(cls, data: Any) -> Self | None:
        """None when usage is absent or null (the spec allows both)."""
        if not isinstance(data, Mapping):
            return None
        given, taken, total = (integer(data.get(name)) for name in cls.WIRE_NAMES)
        if total is None and given is not None and taken is not None:
            total = given + taken
        return cls(given, taken, total, raw=dict(data))


@dataclass(frozen=True, slots=True)
class Call(Kept):
    """A function the model asks the caller to run; `arguments` is the JSON text the model wrote, which
    may be invalid: the application validates it before running anything (spec, migration rule 4)."""

    id: str | None
    name: str | None
    arguments: str = ""

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; raises ValueError when the model wrote invalid JSON."""
        return json.loads(self.arguments or "{}")


@dataclass(frozen=True, slots=True)
class Reply(Kept):
    """What an answer of every text family carries: its id and model, token usage, the request id."""

    id: str | None
    model: str | None
    usage: Any = field(default=None, kw_only=True)  # the family's Usage, or None when not reported
    request_id: str | None = field(default=None, kw_only=True)
    parsed: Any = field(default=None, kw_only=True)  # with `schema=`: the validated answer (client/structured.py)
    # with `schema=`: per field the text may quote, where the source text has it (gwlab/wire/grounding.py)
    grounding: Any = field(default=None, kw_only=True)


class Answer:
    """What a responses or messages answer derives from its ordered items (output items, content blocks)
    alike: the text is that of its text items, in order; the tool calls are its call items."""

    __slots__ = ()
    ITEMS: ClassVar[str]  # the field holding the items
    TEXT_ITEM: ClassVar[type[Any]]
    CALL_ITEM: ClassVar[type[Any]]

    @property
    def text(self) -> str:
        """The text of the text items, in order."""
        return "".join(item.text for item in getattr(self, self.ITEMS) if isinstance(item, self.TEXT_ITEM))

    @property
    def tool_calls(self) -> list[Any]:
        """The items that ask the caller to run a function, in order."""
        return [item for item in getattr(self, self.ITEMS) if isinstance(item, self.CALL_ITEM)]


def by_type(data: Any, readers: Mapping[str, Callable[[Mapping[str, Any]], T]],
            unknown: Callable[[str, Mapping[str, Any]], T]) -> T:
    """An output item or content block typed by its `type` through `readers`; another type (or not an
    object at all) is kept whole by `unknown(type, raw)`, never dropped (spec, migration rule 1)."""
    if not isinstance(data, Mapping):
        return unknown(type(data).__name__, {"value": data})
    kind = data.get("type")
    read = readers.get(kind) if isinstance(kind, str) else None
    return read(data) if read is not None else unknown(str(kind), dict(data))


def integer(value: Any) -> int | None:
    """An integer the wire sent, or None (a boolean is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(value: Any) -> Mapping[str, Any] | None:
    """A copy of an object the wire sent, or None."""
    return dict(value) if isinstance(value, Mapping) else None


def clip(text: str, limit: int = 60) -> str:
    """Text cut to `limit` characters for a repr (an answer may be a whole document)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage_text(usage: Usage | None) -> str:
    """Token counts as a reader wants them in a repr or caption."""
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
    """Keep an event the family does not type (tolerant reader: never dropped)."""
    events.append(unknown)
    return unknown


def handles(*kinds: str) -> Callable[[F], F]:
    """Mark an accumulator method as the handler of these stream event types (see Accumulated)."""

    def mark(method: F) -> F:
        method.handles = kinds  # type: ignore[attr-defined]  # a function takes any attribute; read back by getattr
        return method

    return mark


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
    events: list[Any]  # every event it took, typed or kept unknown (each family's accumulator sets it)

    def result(self) -> Any:  # pragma: no cover - each family's accumulator defines it
        raise NotImplementedError

    HANDLERS: ClassVar[dict[str, Callable[..., None]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Collect the subclass's `@handles` methods into its table: event type -> handler."""
        super().__init_subclass__(**kwargs)
        cls.HANDLERS = {kind: method for method in vars(cls).values() for kind in getattr(method, "handles", ())}

    def _dispatch(self, typed: Any, data: Mapping[str, Any]) -> list[Any]:
        """Keep a typed event and let the handler of its type (a table, not a chain of branches) update
        the state; the typed event is what `add` returns."""
        self.events.append(typed)
        handler = self.HANDLERS.get(typed.type)
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
