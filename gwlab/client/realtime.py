"""Realtime over WebSocket (spec: Realtime; protocols.md §6): typed events, turns, limited reconnects.

One async implementation does the I/O: a reader task owns the socket, so every server event is
parsed, and every `error` event is saved to the ledger with the client event it names, the moment
it arrives, before anything is (re)sent. Events then wait in a queue for the caller's iteration.

Reconnects happen only for the spec's Connection category (a dropped socket, a refused or timed-out
handshake, a 5xx at the upgrade), at most `max_reconnects` times; authentication and session
failures are reported, never retried. A new socket is a new session: the session configuration is
sent again before any queued send, but the conversation does not survive, so a turn cut by a
reconnect is reported interrupted. The sync `Realtime` runs the same code on the private loop thread.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from types import TracebackType
from typing import Any
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from gwlab.client.ledger import Ledger
from gwlab.client.transport import AsyncTransport, Call, normalize_base_url, request_id_of, status_error, ws_url
from gwlab.errors import (
    ConnectionFailed,
    GatewayError,
    ProtocolError,
    StreamError,
    StreamInterrupted,
    Timeout,
)
from gwlab.wire import audio
from gwlab.wire import realtime as wire
from gwlab.wire.limits import REALTIME_BETA, REALTIME_MAX_APPEND_BYTES
from gwlab.wire.models import check_model_id
from gwlab.wire.sse import UnknownEvent

__all__ = [
    "AsyncRealtime",
    "AsyncRealtimeConnection",
    "EphemeralToken",
    "FunctionCall",
    "RateLimit",
    "Realtime",
    "RealtimeConnection",
    "RealtimeError",
    "RealtimeEvent",
    "RealtimeSession",
    "Turn",
    "UnknownEvent",
    "parse_event",
    "realtime_url",
]

_REMEMBERED_EVENTS = 512  # client events kept for matching errors; older ones are forgotten
_MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a server event (websockets' default of 1 MiB is tight for audio)
_MAX_APPEND_BYTES = REALTIME_MAX_APPEND_BYTES * 3 // 8 * 2  # raw audio per event: its base64 fits the cap
_RECONNECT_CLOSE_CODES = frozenset({1006, 1011, 1012, 1013, 1014})  # abnormal, server error, restart, later
_RETRYABLE_HANDSHAKE_STATUSES = frozenset({500, 502, 503, 504})
_BACKOFF_SECONDS = 0.25
_LEDGER_STRING_LIMIT = 80  # longer strings of a related event reach the ledger as "<N chars>"
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})


class _CredentialsRedacted(logging.LoggerAdapter):  # type: ignore[type-arg]
    """websockets logs every handshake header at DEBUG ("> %s: %s"), Authorization included: the
    credential's value is replaced before any handler sees the record."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if len(args) == 2 and isinstance(args[0], str) and args[0].lower() in _CREDENTIAL_HEADERS:
            args = (args[0], "[redacted]")
        super().log(level, msg, *args, **kwargs)


_WS_LOGGER = _CredentialsRedacted(logging.getLogger("websockets.client"), {})


# --- addressing --------------------------------------------------------------------------------
def realtime_url(base_url: str, model: str, *, websocket: bool = True) -> str:
    """`{ws_base_url}/realtime?model=<m>`, or `{base_url}/realtime?model=<m>` for WebRTC.

    ws for http, wss for https; /v1 added only when the base URL lacks it, never twice.
    """
    base = normalize_base_url(base_url)
    return f"{ws_url(base) if websocket else base}/realtime?model={quote(check_model_id(model), safe='')}"


@contextlib.asynccontextmanager
async def _deadline(timeout: float | None, what: str) -> AsyncIterator[None]:
    """asyncio.timeout, reported as gwlab's Timeout (so `except GatewayError` catches it)."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise Timeout(f"no {what} within {timeout:g} s", method="GET", path="/realtime") from None


def _new_event_id() -> str:
    return f"evt_{secrets.token_hex(10)}"


def _checked_session(current: Mapping[str, Any], config: Mapping[str, Any], prefix: str = "session"
                     ) -> dict[str, Any]:
    """`config` as given, once the wire checks passed (an error names `session.<field>`)."""
    wire.update_session(current, config, prefix)
    return dict(config)


# --- server events -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RealtimeEvent:
    """A server event of a known type: the spec's fields typed, the whole event kept in `raw`."""

    type: str
    event_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RealtimeEvent:
        """Typed from the wire; TypeError when a field has another JSON type (the caller keeps it raw)."""
        kinds = _field_kinds(cls)
        values = {k: v for k, v in data.items() if k in kinds}
        for name, value in values.items():
            if not isinstance(value, kinds[name]):
                raise TypeError(f"{data.get('type')}.{name}: unexpected {type(value).__name__}")
        return cls(**values, raw=data)


_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float),
                                       "None": (type(None),), "Mapping[str, Any]": (Mapping,)}


@cache
def _field_kinds(cls: type) -> dict[str, tuple[type, ...]]:
    """Field name -> the JSON-decoded types its annotation allows (annotations are strings here)."""
    return {f.name: tuple(kind for part in str(f.type).split("|") for kind in _KINDS[part.strip()])
            for f in fields(cls) if f.name != "raw"}


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
class ContentPartEvent(RealtimeEvent):
    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    part: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextEvent(RealtimeEvent):
    """response.text.delta (`delta`) and response.text.done (`text`)."""

    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class AudioEvent(RealtimeEvent):
    """response.audio.delta (base64 `delta`, decoded by `.audio`) and response.audio.done."""

    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None

    @property
    def audio(self) -> bytes:
        """The chunk's bytes, in the session's output_audio_format."""
        return base64.b64decode(self.delta) if self.delta else b""


@dataclass(frozen=True, slots=True)
class TranscriptEvent(RealtimeEvent):
    """response.audio_transcript.delta (`delta`) and .done (`transcript`)."""

    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None
    transcript: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionCallArgumentsEvent(RealtimeEvent):
    response_id: str | None = None
    item_id: str | None = None
    output_index: int | None = None
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
        error = data.get("error") if isinstance(data.get("error"), Mapping) else {}
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


# --- results -----------------------------------------------------------------------------------
class RealtimeError(StreamError):
    """An `error` event from the server (already saved to the ledger); `.error_event` has it all."""

    def __init__(self, event: ErrorEvent) -> None:
        self.error_event = event
        self.type, self.related_event = event.error_type, event.related_event
        related = event.related_event
        where = f" (for {related.get('type')} {event.related_event_id})" if related else ""
        error = event.raw.get("error") if isinstance(event.raw.get("error"), Mapping) else {}
        super().__init__(f"{event.error_type}/{event.code}: {event.message}{where}", error=error,
                         event=event.type, method="GET", path="/realtime")


@dataclass(frozen=True, slots=True)
class EphemeralToken:
    """A one-minute, single-connection realtime credential; the value never appears in a repr."""

    value: str = field(repr=False)
    expires_at: int | None = None
    model: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and time.time() >= self.expires_at

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EphemeralToken:
        secret = data.get("client_secret")
        if not isinstance(secret, Mapping) or not isinstance(secret.get("value"), str):
            raise ProtocolError("the answer holds no client_secret.value", method="POST",
                                path="/realtime/sessions")
        return cls(value=secret["value"], expires_at=secret.get("expires_at"), model=data.get("model"),
                   raw=data)


@dataclass(frozen=True, slots=True)
class FunctionCall:
    call_id: str | None
    name: str | None
    arguments: str = ""
    item_id: str | None = None

    def parsed_arguments(self) -> Any:
        """The arguments as JSON (ValueError when the model wrote something else)."""
        return json.loads(self.arguments or "{}")


@dataclass(slots=True)
class Turn:
    """One response, assembled from its events. Complete only when `response.done` said completed."""

    response_id: str | None = None
    status: str | None = None
    status_details: Mapping[str, Any] | None = None
    text: str = ""
    transcript: str = ""
    audio: bytes = field(default=b"", repr=False)  # in `audio_format`, as the server sent it
    audio_format: str = "pcm16"
    function_calls: list[FunctionCall] = field(default_factory=list)
    usage: Mapping[str, Any] | None = None
    errors: list[ErrorEvent] = field(default_factory=list)
    is_complete: bool = False
    events: list[ServerEvent] = field(default_factory=list, repr=False)
    response: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def pcm16(self) -> bytes:
        """The audio as pcm16 (24 kHz for pcm16 sessions, 8 kHz for G.711 ones)."""
        return audio.decode(self.audio, self.audio_format)


class _TurnBuilder:
    """Pure: events in, a Turn out (so replays of recorded events assemble turns the same way)."""

    def __init__(self, audio_format: str) -> None:
        self.turn = Turn(audio_format=audio_format)
        self.started = False
        self._texts: dict[tuple[Any, Any], str] = {}
        self._transcripts: dict[tuple[Any, Any], str] = {}
        self._calls: dict[Any, dict[str, Any]] = {}
        self._audio: list[bytes] = []

    def add(self, event: ServerEvent) -> bool:
        """Take one event; True when the turn is over (response.done of its response)."""
        turn = self.turn
        turn.events.append(event)
        if isinstance(event, ErrorEvent):
            turn.errors.append(event)
            # an error about our response.create means no response is coming
            return not self.started and bool(event.related_event) and \
                event.related_event.get("type") == wire.RESPONSE_CREATE
        if isinstance(event, UnknownEvent) or not event.type.startswith("response."):
            return False
        response_id = getattr(event, "response_id", None)
        if self.started and turn.response_id and response_id and response_id != turn.response_id:
            return False  # another response's event (e.g. a late one of the previous turn)
        self.started = True
        turn.response_id = turn.response_id or response_id
        key = (getattr(event, "item_id", None), getattr(event, "content_index", None))
        if isinstance(event, TextEvent):
            self._texts[key] = event.text if event.text is not None else self._texts.get(key, "") + (
                event.delta or "")
        elif isinstance(event, TranscriptEvent):
            self._transcripts[key] = event.transcript if event.transcript is not None else \
                self._transcripts.get(key, "") + (event.delta or "")
        elif isinstance(event, AudioEvent):
            self._audio.append(event.audio)
        elif isinstance(event, FunctionCallArgumentsEvent):
            call = self._calls.setdefault(event.item_id, {"call_id": event.call_id, "arguments": ""})
            call["arguments"] = event.arguments if event.arguments is not None else \
                call["arguments"] + (event.delta or "")
        elif isinstance(event, OutputItemEvent) and event.item.get("type") == "function_call":
            self._function_item(event.item)
        elif isinstance(event, ResponseEvent):
            turn.response = event.response
            if event.type == wire.RESPONSE_DONE:
                for item in event.response.get("output") or ():
                    if isinstance(item, Mapping) and item.get("type") == "function_call":
                        self._function_item(item)
                turn.status, turn.usage = event.status, event.usage
                turn.status_details = event.response.get("status_details")
                turn.is_complete = event.status == "completed"
                return True
        return False

    def _function_item(self, item: Mapping[str, Any]) -> None:
        call = self._calls.setdefault(item.get("id"), {"arguments": ""})
        call.update({k: item[k] for k in ("call_id", "name") if item.get(k)})
        if item.get("arguments"):
            call["arguments"] = item["arguments"]

    def _settle(self) -> None:
        turn = self.turn
        turn.text = "".join(self._texts.values())
        turn.transcript = "".join(self._transcripts.values())
        turn.audio = b"".join(self._audio)
        turn.function_calls = [FunctionCall(c.get("call_id"), c.get("name"), c.get("arguments", ""), item_id)
                               for item_id, c in self._calls.items()]

    def finish(self) -> Turn:
        self._settle()
        return self.turn


# --- the connection ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _End:
    """Queue marker: the event stream ended (`error` None: the server closed normally)."""

    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class _Reconnected:
    """Queue marker: a new socket (and session) replaced a dropped one; invisible to iteration."""

    generation: int


def _summary(value: Any) -> Any:
    """A client event fit for the ledger: structure kept, long strings (audio, prompts) replaced."""
    if isinstance(value, Mapping):
        return {k: _summary(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_summary(v) for v in value]
    if isinstance(value, str) and len(value) > _LEDGER_STRING_LIMIT:
        return f"<{len(value)} chars>"
    return value


class RealtimeSession:
    """What every realtime channel shares: typed client events out, typed server events in.

    A subclass moves the text (`_transmit`) and feeds what arrives to `_deliver`; this class stamps
    and remembers client events, saves error events, and assembles turns. WebSocket and WebRTC
    (gwlab/client/webrtc.py) differ only in that plumbing.
    """

    def __init__(self, *, model: str, session: Mapping[str, Any] | None,
                 ledger: Ledger | None = None) -> None:
        self.model = model
        self._ledger = ledger
        self._call: Call | None = None  # the session's ledger row, written when it ends
        self._usage: dict[str, int] = {}
        self._session: dict[str, Any] = _checked_session({}, session) if session else {}
        self._server_session: Mapping[str, Any] = {}  # as session.created/updated last described it
        self._sent: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        self._queue: asyncio.Queue[ServerEvent | _End | _Reconnected] = asyncio.Queue()
        self._end: _End | None = None
        self._resampler: audio.Resampler | None = None

    async def _transmit(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    # sending ------------------------------------------------------------------------------------
    @property
    def session(self) -> Mapping[str, Any]:
        """The session configuration this client has sent."""
        return dict(self._session)

    async def send(self, event: Mapping[str, Any]) -> str:
        """Send any client event (an `event_id` is added when missing); returns its event_id."""
        message = self._stamp(event)
        await self._transmit(message)
        return message["event_id"]

    async def session_update(self, **config: Any) -> str:
        """Validate and send session.update; the merged configuration is re-sent after reconnects."""
        checked = _checked_session(self._session, config)
        self._session.update(checked)
        return await self.send({"type": wire.SESSION_UPDATE, "session": checked})

    async def append_audio(self, pcm16: bytes, *, rate: int | None = None) -> str:
        """Append pcm16 to the input buffer, in the session's input_audio_format.

        `rate` (when not the format's) resamples through one streaming resampler, so 20 ms frames
        join without clicks; `commit` flushes its tail. Returns the last event_id sent.
        """
        fmt = self._session.get("input_audio_format", "pcm16")
        target = audio.FORMAT_RATES[fmt]
        if rate is not None and rate != target:
            current = self._resampler
            if current is None or (current.from_rate, current.to_rate) != (rate, target):
                self._resampler = audio.Resampler(rate, target)
            pcm16 = audio.float_to_pcm16(self._resampler.process(audio.pcm16_to_float(pcm16)))
        data = audio.encode(pcm16, fmt)
        event_id = ""
        for start in range(0, max(len(data), 1), _MAX_APPEND_BYTES):
            chunk = base64.b64encode(data[start:start + _MAX_APPEND_BYTES]).decode()
            event_id = await self.send({"type": wire.INPUT_AUDIO_BUFFER_APPEND, "audio": chunk})
        return event_id

    async def commit(self) -> str:
        """Commit the input buffer (manual turns); the resampler's tail is sent first."""
        if self._resampler is not None:
            tail, self._resampler = self._resampler.flush(), None
            if tail.size:
                fmt = self._session.get("input_audio_format", "pcm16")
                data = base64.b64encode(audio.encode(audio.float_to_pcm16(tail), fmt)).decode()
                await self.send({"type": wire.INPUT_AUDIO_BUFFER_APPEND, "audio": data})
        return await self.send({"type": wire.INPUT_AUDIO_BUFFER_COMMIT})

    async def clear(self) -> str:
        """Drop the uncommitted input audio."""
        self._resampler = None
        return await self.send({"type": wire.INPUT_AUDIO_BUFFER_CLEAR})

    async def create_item(self, item: Mapping[str, Any], *, previous_item_id: str | None = None) -> str:
        """conversation.item.create (message, function_call or function_call_output item)."""
        wire.item(item)  # checked; sent as given
        event: dict[str, Any] = {"type": wire.CONVERSATION_ITEM_CREATE, "item": dict(item)}
        if previous_item_id is not None:
            event["previous_item_id"] = previous_item_id
        return await self.send(event)

    async def send_text(self, text: str, *, role: str = "user") -> str:
        """A text message item (user by default); `create_response` asks for the answer."""
        kind = "text" if role == "assistant" else "input_text"
        return await self.create_item({"type": "message", "role": role,
                                       "content": [{"type": kind, "text": text}]})

    async def send_function_output(self, call_id: str, output: Any) -> str:
        """Answer a function call (a non-string output is sent as JSON); then `create_response`."""
        text = output if isinstance(output, str) else json.dumps(output)
        return await self.create_item({"type": "function_call_output", "call_id": call_id, "output": text})

    async def delete_item(self, item_id: str) -> str:
        return await self.send({"type": wire.CONVERSATION_ITEM_DELETE, "item_id": item_id})

    async def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> str:
        """Cut assistant audio the user did not hear (after an interruption)."""
        return await self.send({"type": wire.CONVERSATION_ITEM_TRUNCATE, "item_id": item_id,
                                "content_index": content_index, "audio_end_ms": audio_end_ms})

    async def create_response(self, **options: Any) -> str:
        """response.create; `options` (modalities, instructions, ...) override the session for it."""
        event: dict[str, Any] = {"type": wire.RESPONSE_CREATE}
        if options:
            wire.response_options(wire.update_session(wire.default_session(), self._session), options)
            event["response"] = options
        return await self.send(event)

    async def cancel_response(self, response_id: str | None = None) -> str:
        event: dict[str, Any] = {"type": wire.RESPONSE_CANCEL}
        if response_id is not None:
            event["response_id"] = response_id
        return await self.send(event)

    # receiving ----------------------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[ServerEvent]:
        return self

    async def __anext__(self) -> ServerEvent:
        while True:
            item = await self._next_item()
            if not isinstance(item, _Reconnected):
                return item

    async def recv(self, *, timeout: float | None = None) -> ServerEvent | None:
        """The next server event; None once the session has ended normally."""
        async with _deadline(timeout, "server event"):
            return await anext(self, None)

    async def wait_for(self, *types: str, timeout: float | None = None) -> ServerEvent:
        """Read until an event of one of `types`; an `error` event on the way raises RealtimeError.

        Events read on the way are consumed (the ledger already holds any error among them).
        """
        async with _deadline(timeout, " or ".join(types)):
            async for event in self:
                if event.type in types:
                    return event
                if isinstance(event, ErrorEvent):
                    raise RealtimeError(event)
        raise ConnectionFailed(f"realtime session ended before {' or '.join(types)}", method="GET",
                               path="/realtime")

    async def turn(self, *, timeout: float | None = None) -> Turn:
        """Collect the next response: text, audio, transcript, function calls, usage, status.

        Errors on the way are collected in `turn.errors`; an error about response.create ends the
        turn (nothing is coming). A closed session, a lost connection, a reconnect or the timeout
        mid-turn raises StreamInterrupted with the partial turn in `.partial`.
        """
        builder = _TurnBuilder(self._output_format())
        try:
            async with asyncio.timeout(timeout):
                while True:
                    item = await self._next_item()
                    if isinstance(item, _Reconnected):
                        if builder.started:
                            raise StreamInterrupted("realtime connection dropped mid-turn; the new "
                                                    "session has no conversation", partial=builder.finish())
                        continue
                    if builder.add(item):
                        return builder.finish()
        except StopAsyncIteration:
            reason: str | BaseException = "the realtime session closed before response.done"
        except TimeoutError:
            reason = f"no response.done within {timeout:g} s"
        except StreamInterrupted:
            raise
        except GatewayError as exc:
            reason = exc
        raise StreamInterrupted(f"turn interrupted: {reason}", partial=builder.finish(), method="GET",
                                path="/realtime") from (reason if isinstance(reason, BaseException) else None)

    async def ask(self, text: str, **response_options: Any) -> Turn:
        """send_text + create_response + turn: one question, one answer."""
        await self.send_text(text)
        await self.create_response(**response_options)
        return await self.turn()

    # internals ----------------------------------------------------------------------------------
    def _stamp(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The event with an event_id, checked (strict writer) and remembered for error matching."""
        message = dict(event)
        message.setdefault("event_id", _new_event_id())
        wire.check_client_event(message)
        self._sent[message["event_id"]] = message
        while len(self._sent) > _REMEMBERED_EVENTS:
            self._sent.popitem(last=False)
        return message

    def _output_format(self) -> str:
        return (self._session.get("output_audio_format")
                or self._server_session.get("output_audio_format") or "pcm16")

    async def _next_item(self) -> ServerEvent | _Reconnected:
        item = await self._queue.get()
        if isinstance(item, _End):
            self._queue.put_nowait(item)  # every later read ends the same way
            if item.error is not None:
                raise item.error
            raise StopAsyncIteration
        return item

    def _deliver(self, message: str | bytes) -> None:
        """Parse one message; an error event is saved (spec: before anything is resent), then queued."""
        event = parse_event(message)
        if isinstance(event, ErrorEvent):
            related = self._sent.get(event.related_event_id) if event.related_event_id else None
            event = replace(event, related_event=related)
            self._record_error(event)
        elif isinstance(event, SessionEvent) and isinstance(event.session, Mapping):
            self._server_session = event.session
        elif isinstance(event, ResponseEvent) and event.type == wire.RESPONSE_DONE:
            for name in ("input_tokens", "output_tokens"):
                count = (event.usage or {}).get(name)
                if isinstance(count, int):
                    self._usage[name] = self._usage.get(name, 0) + count
        self._queue.put_nowait(event)

    def _record_error(self, event: ErrorEvent) -> None:
        if self._ledger is None:
            return
        self._ledger.record_realtime_error(
            event_id=event.event_id, type=event.error_type, code=event.code, message=event.message,
            param=event.param, related_event_id=event.related_event_id,
            related_event=_summary(event.related_event) if event.related_event else None, model=self.model)

    def _finish(self, end: _End) -> None:
        if self._end is None:
            self._end = end
            self._queue.put_nowait(end)
            if self._call is not None and self._ledger is not None:
                self._call.record(self._ledger, usage=self._usage or None, complete=end.error is None,
                                  error=end.error)


class AsyncRealtimeConnection(RealtimeSession):
    """One realtime session over a WebSocket: send typed client events, read typed server events.

    Use as `async with gw.realtime.connect(model=...) as rt:`; iterate `async for event in rt`.
    """

    def __init__(self, *, url: str, headers: Mapping[str, str], model: str, session: Mapping[str, Any] | None,
                 max_reconnects: int, ledger: Ledger | None = None, open_timeout: float = 10.0) -> None:
        super().__init__(model=model, session=session, ledger=ledger)
        self.url = url
        self._headers = dict(headers)  # holds the credential: never shown, never logged
        self._open_timeout = open_timeout
        self.max_reconnects = max_reconnects
        self.reconnects = 0
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed: asyncio.Condition | None = None
        self._generation = 0
        self._closing = False

    def __repr__(self) -> str:
        state = "closed" if self._end else ("open" if self._ws else "new")
        return f"<AsyncRealtimeConnection {self.model!r} {state} reconnects={self.reconnects}>"

    async def __aenter__(self) -> AsyncRealtimeConnection:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect (Connection-category failures retried within the budget), then send the session."""
        self._changed = asyncio.Condition()
        self._call = Call("GET", "/realtime", "realtime", self.model, streamed=True)
        try:
            ws = await self._connect_with_budget()
        except GatewayError as exc:
            self._call.status, self._call.retries = getattr(exc, "status", None), self.reconnects
            self._call.request_id = getattr(exc, "request_id", None)
            if self._ledger is not None:
                self._call.record(self._ledger, complete=False, error=exc)
            raise
        self._call.status = ws.response.status_code if ws.response else None
        self._call.request_id = request_id_of(ws.response.headers) if ws.response else None
        await self._resend_session(ws)
        self._ws, self._generation = ws, 1
        self._reader = asyncio.create_task(self._read_forever(), name=f"realtime reader {self.model}")

    async def close(self) -> None:
        """Close the socket and stop the reader; events already queued can still be read."""
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._ws is not None:
            await self._ws.close()
        await self._ended(_End(None))

    async def _transmit(self, message: Mapping[str, Any]) -> None:
        if self._end is not None:
            raise self._end.error or ConnectionFailed("realtime session is closed")
        if self._ws is None:
            raise RuntimeError("call open() (or use `async with`) first")
        generation, text = self._generation, json.dumps(message)
        try:
            await self._ws.send(text)
        except ConnectionClosed:
            # never delivered (websockets refuses to send on a closed socket): one resend is safe
            await self._await_new_socket(generation)
            if self._end is not None:
                raise self._end.error or ConnectionFailed("realtime session is closed") from None
            await self._ws.send(text)

    async def _await_new_socket(self, generation: int) -> None:
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(lambda: self._generation != generation or self._end is not None)

    async def _resend_session(self, ws: ClientConnection) -> None:
        if self._session:
            message = self._stamp({"type": wire.SESSION_UPDATE, "session": self._session})
            # a socket that died already: the reader sees it and reconnects (and re-sends) in turn
            with contextlib.suppress(ConnectionClosed):
                await ws.send(json.dumps(message))

    async def _connect_once(self) -> ClientConnection:
        try:
            return await ws_connect(self.url, additional_headers=self._headers, logger=_WS_LOGGER,
                                    open_timeout=self._open_timeout, max_size=_MAX_MESSAGE_BYTES)
        except InvalidStatus as exc:
            raise _handshake_error(exc) from exc
        except (OSError, TimeoutError, EOFError, InvalidHandshake) as exc:
            raise ConnectionFailed(f"realtime handshake failed: {type(exc).__name__}: {exc}", method="GET",
                                   path="/realtime") from exc

    async def _connect_with_budget(self) -> ClientConnection:
        while True:
            try:
                return await self._connect_once()
            except GatewayError as exc:  # 401/403 and other 4xx: never retried
                retryable = isinstance(exc, ConnectionFailed) or \
                    getattr(exc, "status", None) in _RETRYABLE_HANDSHAKE_STATUSES
                if not retryable or self.reconnects >= self.max_reconnects:
                    raise
            await asyncio.sleep(_BACKOFF_SECONDS * 2 ** self.reconnects)
            self.reconnects += 1

    async def _read_forever(self) -> None:
        try:
            await self._read_and_reconnect()
        except Exception as exc:  # a bug must end the stream loudly, not leave readers waiting forever
            await self._ended(_End(exc))

    async def _read_and_reconnect(self) -> None:
        assert self._ws is not None
        while True:
            try:
                async for message in self._ws:
                    self._deliver(message)
                return await self._ended(_End(None))  # closed normally by the server: the session ended
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else 1006
                if self._closing:
                    return await self._ended(_End(None))
                if code not in _RECONNECT_CLOSE_CODES or self.reconnects >= self.max_reconnects:
                    return await self._ended(_End(ConnectionFailed(
                        f"realtime connection closed (code {code}) after {self.reconnects} reconnects",
                        method="GET", path="/realtime")))
            try:
                await self._reconnect()
            except GatewayError as exc:
                return await self._ended(_End(exc))

    async def _reconnect(self) -> None:
        """A new socket (within the budget), the session config re-sent, then queued sends let through."""
        await asyncio.sleep(_BACKOFF_SECONDS * 2 ** self.reconnects)
        self.reconnects += 1
        ws = await self._connect_with_budget()
        if self._call is not None:
            self._call.retries = self.reconnects
        await self._resend_session(ws)
        assert self._changed is not None
        async with self._changed:
            self._ws = ws
            self._generation += 1
            self._queue.put_nowait(_Reconnected(self._generation))
            self._changed.notify_all()

    async def _ended(self, end: _End) -> None:
        self._finish(end)
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()


def _handshake_error(exc: InvalidStatus) -> GatewayError:
    """A refused upgrade as the status's error class (401 AuthenticationFailed, 403 PermissionDenied...)."""
    response = exc.response
    headers = list(response.headers.raw_items())  # a repeated header is kept, not an error
    return status_error(response.status_code, headers, response.body, method="GET", path="/realtime",
                        family="realtime", reason="realtime handshake refused")


# --- the family ----------------------------------------------------------------------------------
class AsyncRealtime:
    """`gw.realtime`: WebSocket sessions and ephemeral tokens."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    @property
    def ledger(self) -> Ledger:
        """Where sessions and their error events are recorded (the transport's ledger)."""
        return self._transport.ledger

    def _is_api_key(self, value: str) -> bool:
        """Whether `value` is the long-lived key (WebRTC refuses to send it); constant-time."""
        bearer = self._transport.auth_headers("realtime").get("authorization", "")
        return secrets.compare_digest(f"Bearer {value}".encode(), bearer.encode())

    def connect(self, model: str, *, session: Mapping[str, Any] | None = None,
                ephemeral_token: EphemeralToken | str | None = None,
                max_reconnects: int = 2) -> AsyncRealtimeConnection:
        """A realtime connection (not yet open): `async with gw.realtime.connect(model=...) as rt:`.

        Authenticates with the gateway key, or with `ephemeral_token` when given (a single-use
        token cannot reconnect: the second handshake fails authentication and is not retried).
        """
        token = ephemeral_token.value if isinstance(ephemeral_token, EphemeralToken) else ephemeral_token
        auth = {"authorization": f"Bearer {token}"} if token else self._transport.auth_headers("realtime")
        return AsyncRealtimeConnection(url=realtime_url(self.base_url, model),
                                       headers={**auth, "openai-beta": REALTIME_BETA}, model=model,
                                       session=session, max_reconnects=max_reconnects, ledger=self.ledger)

    async def session_token(self, model: str, *, voice: str | None = None, **config: Any) -> EphemeralToken:
        """POST /realtime/sessions: an ephemeral token for one connection within a minute."""
        if voice is not None:
            config["voice"] = voice
        body: dict[str, Any] = {"model": check_model_id(model), **_checked_session({}, config, prefix="")}
        return await self._transport.request("POST", "/realtime/sessions", family="realtime", json=body,
                                             parse=lambda data, _request_id: EphemeralToken.from_wire(data))


class RealtimeConnection:
    """The sync twin of AsyncRealtimeConnection: each method runs its twin on the loop thread."""

    def __init__(self, twin: AsyncRealtimeConnection, loop: Any) -> None:
        self._twin, self._loop = twin, loop

    def __repr__(self) -> str:
        return repr(self._twin).replace("AsyncRealtimeConnection", "RealtimeConnection")

    def __enter__(self) -> RealtimeConnection:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[ServerEvent]:
        return self

    def __next__(self) -> ServerEvent:
        try:
            return self._loop.run(self._twin.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    @property
    def session(self) -> Mapping[str, Any]:
        return self._twin.session

    @property
    def reconnects(self) -> int:
        return self._twin.reconnects

    def open(self) -> None:
        return self._loop.run(self._twin.open())

    def close(self) -> None:
        return self._loop.run(self._twin.close())

    def send(self, event: Mapping[str, Any]) -> str:
        return self._loop.run(self._twin.send(event))

    def session_update(self, **config: Any) -> str:
        return self._loop.run(self._twin.session_update(**config))

    def append_audio(self, pcm16: bytes, *, rate: int | None = None) -> str:
        return self._loop.run(self._twin.append_audio(pcm16, rate=rate))

    def commit(self) -> str:
        return self._loop.run(self._twin.commit())

    def clear(self) -> str:
        return self._loop.run(self._twin.clear())

    def create_item(self, item: Mapping[str, Any], *, previous_item_id: str | None = None) -> str:
        return self._loop.run(self._twin.create_item(item, previous_item_id=previous_item_id))

    def send_text(self, text: str, *, role: str = "user") -> str:
        return self._loop.run(self._twin.send_text(text, role=role))

    def send_function_output(self, call_id: str, output: Any) -> str:
        return self._loop.run(self._twin.send_function_output(call_id, output))

    def delete_item(self, item_id: str) -> str:
        return self._loop.run(self._twin.delete_item(item_id))

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> str:
        return self._loop.run(self._twin.truncate(item_id, content_index, audio_end_ms))

    def create_response(self, **options: Any) -> str:
        return self._loop.run(self._twin.create_response(**options))

    def cancel_response(self, response_id: str | None = None) -> str:
        return self._loop.run(self._twin.cancel_response(response_id))

    def recv(self, *, timeout: float | None = None) -> ServerEvent | None:
        return self._loop.run(self._twin.recv(timeout=timeout))

    def wait_for(self, *types: str, timeout: float | None = None) -> ServerEvent:
        return self._loop.run(self._twin.wait_for(*types, timeout=timeout))

    def turn(self, *, timeout: float | None = None) -> Turn:
        return self._loop.run(self._twin.turn(timeout=timeout))

    def ask(self, text: str, **response_options: Any) -> Turn:
        return self._loop.run(self._twin.ask(text, **response_options))


class Realtime:
    """The sync twin of AsyncRealtime (`gw.realtime` on `Gateway`), usable from a notebook."""

    def __init__(self, twin: AsyncRealtime, loop: Any) -> None:
        self._twin, self._loop = twin, loop

    def connect(self, model: str, *, session: Mapping[str, Any] | None = None,
                ephemeral_token: EphemeralToken | str | None = None,
                max_reconnects: int = 2) -> RealtimeConnection:
        return RealtimeConnection(self._twin.connect(model, session=session, ephemeral_token=ephemeral_token,
                                                     max_reconnects=max_reconnects), self._loop)

    def session_token(self, model: str, *, voice: str | None = None, **config: Any) -> EphemeralToken:
        return self._loop.run(self._twin.session_token(model, voice=voice, **config))
