"""Realtime server events as typed values, and `parse_event` (spec: Realtime; protocols.md §6).

Pure: one WebSocket (or WebRTC data-channel) message in, a typed event out, with no I/O, so the client
(gwlab/client/realtime*.py), the notebook console and replays of recorded sessions read events the same
way. A type not listed, or a known type in an unexpected shape, stays an `UnknownEvent` with its raw
JSON: never a mistyped value, never an exception.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from gwlab.wire.realtime import session as wire
from gwlab.wire.sse import UnknownEvent

__all__ = [
    "AudioEvent", "ContentPartEvent", "ConversationEvent", "ErrorEvent", "FunctionCallArgumentsEvent",
    "InputAudioBufferEvent", "InputTranscriptionEvent", "ItemEvent", "OutputAudioBufferEvent",
    "OutputItemEvent", "RateLimit", "RateLimitsEvent", "RealtimeEvent", "ResponseEvent", "ServerEvent",
    "SessionEvent", "TextEvent", "TranscriptEvent", "UnknownEvent", "parse_event",
]


@dataclass(frozen=True, slots=True)
class RealtimeEvent:
    """A server event of a known type: the spec's fields typed, the whole event kept in `raw`."""

    type: str
    event_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RealtimeEvent:
        """Typed from the wire; TypeError when a field has another JSON type (the caller keeps it raw)."""
        kinds = _field_kinds(_as_type(cls))
        values = {k: v for k, v in data.items() if k in kinds}
        for name, value in values.items():
            if not isinstance(value, kinds[name]):
                raise TypeError(f"{data.get('type')}.{name}: unexpected {type(value).__name__}")
        return cls(**values, raw=data)


def _as_type(cls: type) -> type:
    """`cls` as a plain type: mypy checks a class object against Hashable by its instances' `__hash__`
    (a frozen dataclass's takes `self`), so `@cache` would refuse the class itself."""
    return cls


@cache
def _field_kinds(cls: type) -> dict[str, tuple[type, ...]]:
    """Field name -> the JSON-decoded types its annotation allows, read from the resolved annotation
    (any type: a field of a type without a JSON counterpart accepts any value rather than failing)."""
    hints = get_type_hints(cls)
    return {f.name: _json_types(hints[f.name]) for f in fields(cls) if f.name != "raw"}


def _json_types(annotation: Any) -> tuple[type, ...]:
    """`str | None` -> (str, NoneType); `float` also takes an int; `Mapping[...]` -> Mapping;
    `tuple[...]` -> list or tuple (JSON arrays decode to lists); `Any` or a type JSON cannot hold -> object."""
    if annotation is Any:
        return (object,)
    if annotation is float:
        return (int, float)
    if annotation is None or annotation is type(None):
        return (type(None),)
    origin = get_origin(annotation)
    if origin is Union or origin is UnionType:
        return tuple(kind for arg in get_args(annotation) for kind in _json_types(arg))
    if origin is tuple or annotation is tuple:
        return (list, tuple)
    kind = origin if origin is not None else annotation
    return (kind,) if isinstance(kind, type) else (object,)


@dataclass(frozen=True, slots=True)
class SessionEvent(RealtimeEvent):
    session: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConversationEvent(RealtimeEvent):
    conversation: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ItemEvent(RealtimeEvent):
    """conversation.item.*: created/retrieved carry `item`; truncated/deleted name `item_id`."""

    item: Mapping[str, Any] | None = None
    previous_item_id: str | None = None
    item_id: str | None = None
    content_index: int | None = None
    audio_end_ms: int | None = None


@dataclass(frozen=True, slots=True)
class InputTranscriptionEvent(RealtimeEvent):
    item_id: str | None = None
    content_index: int | None = None
    delta: str | None = None
    transcript: str | None = None
    usage: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class InputAudioBufferEvent(RealtimeEvent):
    item_id: str | None = None
    previous_item_id: str | None = None
    audio_start_ms: int | None = None
    audio_end_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ResponseEvent(RealtimeEvent):
    """response.created / response.done: the RealtimeResponse object in `response`."""

    response: Mapping[str, Any] = field(default_factory=dict)

    @property
    def response_id(self) -> str | None:
        return self.response.get("id")

    @property
    def status(self) -> str | None:
        return self.response.get("status")

    @property
    def usage(self) -> Mapping[str, Any] | None:
        return self.response.get("usage")


@dataclass(frozen=True, slots=True)
class OutputItemEvent(RealtimeEvent):
    response_id: str | None = None
    output_index: int | None = None
    item: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _OutputEvent(RealtimeEvent):
    """An event about one item of a response's output: which response, which item, where in the output."""

    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None


@dataclass(frozen=True, slots=True)
class _PartEvent(_OutputEvent):
    """An event about one content part of an output item."""

    content_index: int | None = None


@dataclass(frozen=True, slots=True)
class ContentPartEvent(_PartEvent):
    part: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextEvent(_PartEvent):
    """response.text.delta (`delta`) and response.text.done (`text`)."""

    delta: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class AudioEvent(_PartEvent):
    """response.audio.delta (base64 `delta`, decoded by `.audio`) and response.audio.done."""

    delta: str | None = None

    @property
    def audio(self) -> bytes:
        """The chunk's bytes, in the session's output_audio_format."""
        return base64.b64decode(self.delta) if self.delta else b""


@dataclass(frozen=True, slots=True)
class TranscriptEvent(_PartEvent):
    """response.audio_transcript.delta (`delta`) and .done (`transcript`)."""

    delta: str | None = None
    transcript: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionCallArgumentsEvent(_OutputEvent):
    call_id: str | None = None
    delta: str | None = None
    arguments: str | None = None


@dataclass(frozen=True, slots=True)
class RateLimit:
    name: str | None = None
    limit: int | None = None
    remaining: int | None = None
    reset_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class RateLimitsEvent(RealtimeEvent):
    rate_limits: tuple[RateLimit, ...] = ()

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RateLimitsEvent:
        names = {f.name for f in fields(RateLimit)}
        limits = tuple(RateLimit(**{k: v for k, v in entry.items() if k in names})
                       for entry in data.get("rate_limits") or () if isinstance(entry, Mapping))
        return cls(type=data["type"], event_id=data.get("event_id"), rate_limits=limits, raw=data)


@dataclass(frozen=True, slots=True)
class OutputAudioBufferEvent(RealtimeEvent):
    """output_audio_buffer.started/stopped/cleared (WebRTC only)."""

    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorEvent(RealtimeEvent):
    """An `error` event: error.type/code/message/param flattened; `related_event` is the client
    event named by error.event_id, when this connection still remembers it."""

    error_type: str | None = None
    code: str | None = None
    message: str | None = None
    param: str | None = None
    related_event_id: str | None = None
    related_event: Mapping[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ErrorEvent:
        error = got if isinstance(got := data.get("error"), Mapping) else {}
        return cls(type=data["type"], event_id=data.get("event_id"), error_type=error.get("type"),
                   code=error.get("code"), message=error.get("message"), param=error.get("param"),
                   related_event_id=error.get("event_id"), raw=data)


ServerEvent = RealtimeEvent | UnknownEvent

# event type -> class: a new known type is one line (types not listed stay UnknownEvent)
_EVENT_CLASSES: dict[str, type[RealtimeEvent]] = {
    wire.ERROR: ErrorEvent,
    wire.SESSION_CREATED: SessionEvent,
    wire.SESSION_UPDATED: SessionEvent,
    wire.CONVERSATION_CREATED: ConversationEvent,
    wire.CONVERSATION_ITEM_CREATED: ItemEvent,
    wire.CONVERSATION_ITEM_RETRIEVED: ItemEvent,
    wire.CONVERSATION_ITEM_TRUNCATED: ItemEvent,
    wire.CONVERSATION_ITEM_DELETED: ItemEvent,
    wire.INPUT_TRANSCRIPTION_COMPLETED: InputTranscriptionEvent,
    wire.INPUT_TRANSCRIPTION_FAILED: InputTranscriptionEvent,
    wire.INPUT_AUDIO_BUFFER_COMMITTED: InputAudioBufferEvent,
    wire.INPUT_AUDIO_BUFFER_CLEARED: InputAudioBufferEvent,
    wire.INPUT_AUDIO_BUFFER_SPEECH_STARTED: InputAudioBufferEvent,
    wire.INPUT_AUDIO_BUFFER_SPEECH_STOPPED: InputAudioBufferEvent,
    wire.RESPONSE_CREATED: ResponseEvent,
    wire.RESPONSE_DONE: ResponseEvent,
    wire.RESPONSE_OUTPUT_ITEM_ADDED: OutputItemEvent,
    wire.RESPONSE_OUTPUT_ITEM_DONE: OutputItemEvent,
    wire.RESPONSE_CONTENT_PART_ADDED: ContentPartEvent,
    wire.RESPONSE_CONTENT_PART_DONE: ContentPartEvent,
    wire.RESPONSE_TEXT_DELTA: TextEvent,
    wire.RESPONSE_TEXT_DONE: TextEvent,
    wire.RESPONSE_AUDIO_DELTA: AudioEvent,
    wire.RESPONSE_AUDIO_DONE: AudioEvent,
    wire.RESPONSE_AUDIO_TRANSCRIPT_DELTA: TranscriptEvent,
    wire.RESPONSE_AUDIO_TRANSCRIPT_DONE: TranscriptEvent,
    wire.RESPONSE_FUNCTION_CALL_ARGUMENTS_DELTA: FunctionCallArgumentsEvent,
    wire.RESPONSE_FUNCTION_CALL_ARGUMENTS_DONE: FunctionCallArgumentsEvent,
    wire.RATE_LIMITS_UPDATED: RateLimitsEvent,
    wire.OUTPUT_AUDIO_BUFFER_STARTED: OutputAudioBufferEvent,
    wire.OUTPUT_AUDIO_BUFFER_STOPPED: OutputAudioBufferEvent,
    wire.OUTPUT_AUDIO_BUFFER_CLEARED: OutputAudioBufferEvent,
}


def parse_event(message: str | bytes) -> ServerEvent:
    """One WebSocket message as a typed event; anything unknown or malformed is an UnknownEvent."""
    try:
        data = json.loads(message)
    except ValueError:
        return UnknownEvent("", {"message": message})
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        return UnknownEvent("", data)
    cls = _EVENT_CLASSES.get(data["type"])
    if cls is None:
        return UnknownEvent(data["type"], data)
    try:
        return cls.from_wire(data)
    except (TypeError, AttributeError):  # a known type in an unexpected shape: kept, not mistyped
        return UnknownEvent(data["type"], data)
