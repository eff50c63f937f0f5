"""What every realtime channel shares (spec: Realtime; protocols.md §6): client events stamped,
checked and remembered, server events queued, error events saved, turns assembled.

The WebSocket connection (gwlab/client/realtime/socket.py) and WebRTC (gwlab/client/realtime/webrtc.py) subclass
`RealtimeSession` and differ only in how text moves. `_TurnBuilder` is pure, so replays of recorded
events assemble turns the same way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gwlab.client.ledger import CallRecord, Ledger
from gwlab.errors import ConnectionFailed, GatewayError, RealtimeError, StreamInterrupted, Timeout
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import REALTIME_MAX_APPEND_BYTES
from gwlab.wire.realtime import session as wire
from gwlab.wire.realtime.events import (
    AudioEvent,
    ErrorEvent,
    FunctionCallArgumentsEvent,
    OutputItemEvent,
    ResponseEvent,
    ServerEvent,
    SessionEvent,
    TextEvent,
    TranscriptEvent,
    UnknownEvent,
    parse_event,
)

if TYPE_CHECKING:
    from gwlab.wire.realtime import audio  # numpy: imported where audio is handled, not with the client

__all__ = ["FunctionCall", "RealtimeSession", "Turn"]
REALTIME = FAMILIES["realtime"]

_REMEMBERED_EVENTS = 512  # client events kept for matching errors; older ones are forgotten
_MAX_APPEND_BYTES = REALTIME_MAX_APPEND_BYTES * 3 // 8 * 2  # raw audio per event: its base64 fits the cap
_LEDGER_STRING_LIMIT = 80  # longer strings of a related event reach the ledger as "<N chars>"


@contextlib.asynccontextmanager
async def _deadline(timeout: float | None, what: str) -> AsyncIterator[None]:
    """asyncio.timeout, reported as gwlab's Timeout (so `except GatewayError` catches it)."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise Timeout(f"no {what} within {timeout:g} s", method="GET", path=REALTIME.path) from None


def _new_event_id() -> str:
    return f"evt_{secrets.token_hex(10)}"


def _checked_session(current: Mapping[str, Any], config: Mapping[str, Any], prefix: str = "session"
                     ) -> dict[str, Any]:
    """`config` as given, once the wire checks passed (an error names `session.<field>`)."""
    wire.update_session(current, config, prefix)
    return dict(config)


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
        from gwlab.wire.realtime import audio

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
            related = event.related_event
            return not self.started and related is not None and related.get("type") == wire.RESPONSE_CREATE
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


# --- the session -------------------------------------------------------------------------------
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
    (gwlab/client/realtime/webrtc.py) differ only in that plumbing.
    """

    def __init__(self, *, model: str, session: Mapping[str, Any] | None,
                 ledger: Ledger | None = None) -> None:
        self.model = model
        self._ledger = ledger
        self._call: CallRecord | None = None  # the session's ledger row, written when it ends
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
        event_id: str = message["event_id"]  # _stamp's, or the caller's checked as a string
        return event_id

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
        from gwlab.wire.realtime import audio

        fmt = self._session.get("input_audio_format", "pcm16")
        target = audio.FORMAT_RATES[fmt]
        if rate is not None and rate != target:
            resampler = self._resampler
            if resampler is None or (resampler.from_rate, resampler.to_rate) != (rate, target):
                resampler = self._resampler = audio.Resampler(rate, target)
            pcm16 = audio.float_to_pcm16(resampler.process(audio.pcm16_to_float(pcm16)))
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
                from gwlab.wire.realtime import audio

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
                    raise RealtimeError(event, method=REALTIME.method, path=REALTIME.path)
        raise ConnectionFailed(f"realtime session ended before {' or '.join(types)}", method="GET",
                               path=REALTIME.path)

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
                                path=REALTIME.path) from (reason if isinstance(reason, BaseException) else None)

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
