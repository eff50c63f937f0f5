"""One realtime session, whatever carries it: the WebSocket route and the WebRTC data channel share it.

The transport hands in client events (`handle`) and, for WebRTC, microphone audio (`feed_audio`); the
session answers through a `send` callable that queues server events in order, and for WebRTC plays
speech on an `AudioSink` instead of sending `response.audio.delta` events (protocols.md §6.7).
Everything slow (Whisper, Gemma, espeak) runs in worker threads, so a session never blocks the loop.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from gwlab.errors import InvalidRequest
from gwlab.local import textgen
from gwlab.local.errors import APIError
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text, ToolChoice
from gwlab.local.vad import EnergyVad
from gwlab.wire import audio
from gwlab.wire import realtime as rt
from gwlab.wire.limits import (
    PCM16_SAMPLE_RATE,
    REALTIME_MAX_APPEND_BYTES,
    REALTIME_MIN_COMMIT_MS,
    REALTIME_SESSION_SECONDS,
)
from gwlab.wire.tools import parse_tool

log = logging.getLogger("gwlab.local")

RATE = PCM16_SAMPLE_RATE  # every input is kept as pcm16 at 24 kHz, whatever format it arrived in
INF_TOKENS = 256  # "inf": a base model left alone loops, and a spoken answer should be short anyway
AUDIO_CHUNK_MS = 200  # size of one response.audio.delta
UNLIMITED = 2**31 - 1  # rate_limits.updated when no limit is configured: nothing to run out of
# the first spoken piece ends at a clause (sooner speech); later ones at a sentence or a long clause
_FIRST_BREAK = re.compile(r"[.!?;:,]\s")
_LATER_BREAK = re.compile(r"[.!?;:]\s")
_LONG_CLAUSE = 80
EARLY_TRANSCRIBE_MS = 200  # into a pause, Whisper starts on the turn so far (the VAD's wait hides it)
_FIRST_WORDS = 4  # ...or after this many words, when no clause has ended yet: the first audio comes sooner


class AudioSink(Protocol):
    """Where speech goes when it is not sent as events (the WebRTC output track)."""

    def play(self, pcm16: bytes) -> None:
        """Queue mono pcm16 at 24 kHz for playback."""
        ...

    def clear(self) -> None:
        """Drop whatever has not been played yet."""
        ...

    def set_drained(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the queued audio has all been played."""
        ...


@dataclass(slots=True)
class _Response:
    id: str
    options: dict[str, Any]
    event_id: str | None
    plan: Plan = field(default_factory=Plan)
    task: asyncio.Task[None] | None = None
    output: list[dict[str, Any]] = field(default_factory=list)
    part: dict[str, Any] | None = None  # the open content part of the open message item
    text: str = ""  # text, or the transcript of the audio
    pending: str = ""  # transcript not spoken yet
    audio: bytearray = field(default_factory=bytearray)  # in output_audio_format
    audio_started: bool = False
    playing: bool = False  # WebRTC: speech queued on the track and not played out yet
    playback_closed: bool = False  # WebRTC: output_audio_buffer.stopped or .cleared was sent
    cancel_reason: str | None = None
    done: bool = False
    usage: dict[str, Any] | None = None
    rate_limits: dict[str, str] = field(default_factory=dict)  # the limiter's headers, when one is set

    @property
    def speaks(self) -> bool:
        return "audio" in self.options["modalities"]

    @property
    def in_conversation(self) -> bool:
        return self.options["conversation"] == "auto"


def _event_error(exc: InvalidRequest | APIError, event_id: str | None) -> dict[str, Any]:
    if isinstance(exc, InvalidRequest):
        return {"type": "invalid_request_error", "code": getattr(exc, "code", rt.INVALID_VALUE),
                "message": str(exc), "param": exc.field or None,
                "event_id": getattr(exc, "event_id", None) or event_id}
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    return {"type": exc.type or kind, "code": exc.code or rt.INVALID_VALUE, "message": exc.message,
            "param": exc.param, "event_id": event_id}


class RealtimeSession:
    """State and behaviour of one session; `send` receives every server event, in order."""

    def __init__(self, send: Callable[[dict[str, Any]], None], *, model: str,
                 config: dict[str, Any] | None = None, audio_sink: AudioSink | None = None,
                 rate_limit: Callable[[], dict[str, str]] | None = None) -> None:
        self._send, self.model, self._sink, self._rate_limit = send, model, audio_sink, rate_limit
        config = dict(config or {})
        self.id = config.pop("id", None) or textgen.new_id("sess_")
        self.session = rt.update_session(rt.default_session(), config, "") if config else rt.default_session()
        self.conversation_id = textgen.new_id("conv_")
        self.expires_at = int(time.time()) + REALTIME_SESSION_SECONDS
        self.items: list[dict[str, Any]] = []
        self.usage = [0, 0]  # input, output tokens over the session (for the request log)
        self._audio: dict[str, bytes] = {}  # item id -> its audio (input: pcm16 24 kHz; output: as sent)
        self._heard: dict[str, asyncio.Task[str]] = {}  # input audio item id -> its transcript
        self._tasks: set[asyncio.Task[Any]] = set()
        self._response: _Response | None = None
        self._playback: _Response | None = None  # WebRTC: the response whose speech is on the track
        self._voice_used = False
        self._buffer = bytearray()  # pcm16 at 24 kHz, not committed yet
        self._buffer_start = 0  # position of _buffer[0], in samples since the session began
        self._received = 0  # samples received since the session began
        self._resamplers: dict[int, audio.Resampler] = {}
        self._vad: EnergyVad | None = None
        self._vad_base = 0
        self._speech_item: str | None = None
        self._early: asyncio.Task[str] | None = None  # transcript of the turn so far, begun in a pause
        self._reset_vad()

    # --- plumbing -----------------------------------------------------------------------------------
    def emit(self, kind: str, **fields: Any) -> None:
        self._send({"event_id": textgen.new_id("event_"), "type": kind, **fields})

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def session_object(self) -> dict[str, Any]:
        return {"id": self.id, "object": "realtime.session", "model": self.model,
                "expires_at": self.expires_at, **copy.deepcopy(self.session)}

    async def start(self) -> None:
        self.emit(rt.SESSION_CREATED, session=self.session_object())
        self.emit(rt.CONVERSATION_CREATED,
                  conversation={"id": self.conversation_id, "object": "realtime.conversation"})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    # --- client events ------------------------------------------------------------------------------
    async def handle(self, data: str | bytes) -> None:
        """One client frame: acted on, or answered by an `error` event; the connection always stays."""
        event_id = None
        try:
            event = rt.parse_client_event(data)
            event_id = event.get("event_id")
            await self._HANDLERS[event["type"]](self, event)
        except (InvalidRequest, APIError) as exc:
            self.emit(rt.ERROR, error=_event_error(exc, event_id))
        except Exception as exc:  # a bug must not end the session: report it and go on
            log.exception("realtime event failed")
            self.emit(rt.ERROR, error={"type": "server_error", "code": "server_error", "param": None,
                                       "message": f"The local gateway failed on this event: {exc}",
                                       "event_id": event_id})

    async def _session_update(self, event: dict[str, Any]) -> None:
        updated = rt.session_update(self.session, event)
        if self._voice_used and updated["voice"] != self.session["voice"]:
            raise rt.InvalidEvent("session.voice" if "session" in event else "voice",
                                  "cannot change once the session has produced audio", "cannot_update_voice")
        relisten = any(updated[k] != self.session[k] for k in ("turn_detection", "input_audio_format"))
        self.session = updated
        if relisten:
            self._reset_vad()
        self.emit(rt.SESSION_UPDATED, session=self.session_object())

    async def _append(self, event: dict[str, Any]) -> None:
        data = rt.audio_bytes(event["audio"], "audio")
        if len(data) > REALTIME_MAX_APPEND_BYTES:
            raise rt.InvalidEvent("audio", f"holds more than {REALTIME_MAX_APPEND_BYTES} bytes of audio")
        fmt = self.session["input_audio_format"]
        if fmt == "pcm16" and len(data) % 2:
            raise rt.InvalidEvent("audio", "pcm16 audio needs an even number of bytes")
        self._ingest(audio.decode(data, fmt), audio.FORMAT_RATES[fmt])

    async def _commit(self, event: dict[str, Any]) -> None:
        if len(self._buffer) // 2 < RATE * REALTIME_MIN_COMMIT_MS // 1000:
            got = len(self._buffer) // 2 / RATE * 1000
            raise rt.InvalidEvent("", f"buffer too small: a commit needs at least {REALTIME_MIN_COMMIT_MS} "
                                  f"ms of audio, got {got:.0f} ms", "input_audio_buffer_commit_empty")
        self._commit_buffer(self._speech_item or textgen.new_id("item_"), self._received)
        self._reset_vad()

    async def _clear(self, event: dict[str, Any]) -> None:
        self._buffer.clear()
        self._buffer_start = self._received
        self._reset_vad()
        self.emit(rt.INPUT_AUDIO_BUFFER_CLEARED)

    async def _item_create(self, event: dict[str, Any]) -> None:
        item = rt.item(event["item"])
        previous = event.get("previous_item_id")
        if previous is not None and previous != "root" and self._find(previous) is None:
            raise rt.InvalidEvent("previous_item_id", f"no item with id {previous!r}", "item_not_found")
        if "id" in item and self._find(item["id"]) is not None:
            raise rt.InvalidEvent("item.id", f"an item with id {item['id']!r} already exists",
                                  "duplicate_item_id")
        item = {"id": item.pop("id", None) or textgen.new_id("item_"), "object": "realtime.item",
                "status": item.pop("status", "completed"), **item}
        for index, part in enumerate(item.get("content", [])):
            if part.get("audio") is not None:  # spoken input: the text model reads its transcript
                fmt = self.session["input_audio_format"]
                pcm = audio.decode(base64.b64decode(part.pop("audio")), fmt)
                pcm = audio.resample_pcm16(pcm, audio.FORMAT_RATES[fmt], RATE)
                self._audio[item["id"]] = pcm
                if part.get("transcript") is None:
                    self._transcribe(item, index, pcm)
        self._insert(item, previous)

    async def _item_retrieve(self, event: dict[str, Any]) -> None:
        item = self._require_item(event["item_id"])
        shown = copy.deepcopy(item)
        if item["id"] in self._audio:
            for part in shown.get("content", []):
                if part["type"] in ("input_audio", "audio"):
                    part["audio"] = base64.b64encode(self._audio[item["id"]]).decode()
        self.emit(rt.CONVERSATION_ITEM_RETRIEVED, item=shown)

    async def _item_truncate(self, event: dict[str, Any]) -> None:
        item = self._require_item(event["item_id"])
        index, end_ms = event["content_index"], event["audio_end_ms"]
        content = item.get("content", [])
        if item["type"] != "message" or item.get("role") != "assistant":
            raise rt.InvalidEvent("item_id", "only assistant message items can be truncated")
        if index >= len(content) or content[index]["type"] != "audio":
            raise rt.InvalidEvent("content_index", f"item {item['id']} has no audio part at index {index}")
        fmt = self.session["output_audio_format"]
        data = self._audio.get(item["id"], b"")
        per_ms = audio.FORMAT_RATES[fmt] // 1000 * (2 if fmt == "pcm16" else 1)
        if end_ms * per_ms > len(data):
            raise rt.InvalidEvent("audio_end_ms", f"is past the end of the item's audio "
                                  f"({len(data) // per_ms} ms)")
        self._audio[item["id"]] = data[: end_ms * per_ms]
        content[index]["transcript"] = ""  # unheard speech leaves no text behind (protocols.md §6.3)
        self.emit(rt.CONVERSATION_ITEM_TRUNCATED, item_id=item["id"], content_index=index,
                  audio_end_ms=end_ms)

    async def _item_delete(self, event: dict[str, Any]) -> None:
        item = self._require_item(event["item_id"])
        self.items.remove(item)
        self._audio.pop(item["id"], None)
        self.emit(rt.CONVERSATION_ITEM_DELETED, item_id=item["id"])

    async def _response_create(self, event: dict[str, Any]) -> None:
        if self._response is not None:
            raise rt.InvalidEvent("", f"response {self._response.id} is still in progress; cancel it or wait "
                                  "for response.done", "conversation_already_has_active_response")
        options = rt.response_options(self.session, event.get("response"))
        await self._start_response(options, event.get("event_id"))

    async def _response_cancel(self, event: dict[str, Any]) -> None:
        response = self._response
        wanted = event.get("response_id")
        if response is None or (wanted is not None and wanted != response.id):
            raise rt.InvalidEvent("response_id" if wanted else "", "no response in progress to cancel"
                                  + (f" with id {wanted!r}" if wanted else ""), "response_cancel_not_active")
        self._cancel(response, "client_cancelled")

    async def _output_clear(self, event: dict[str, Any]) -> None:
        if self._sink is None:
            raise rt.InvalidEvent("type", "output_audio_buffer.clear exists only over WebRTC")
        playback = self._playback
        self._stop_playback(rt.OUTPUT_AUDIO_BUFFER_CLEARED)
        if playback is None or not playback.audio_started:  # nothing was playing: still answered
            self.emit(rt.OUTPUT_AUDIO_BUFFER_CLEARED, response_id=None)

    async def _transcription_update(self, event: dict[str, Any]) -> None:
        raise rt.InvalidEvent("type", "transcription-only sessions are not served here; use session.update "
                              "with input_audio_transcription")

    _HANDLERS: ClassVar[dict[str, Callable[[RealtimeSession, dict[str, Any]], Any]]] = {
        rt.SESSION_UPDATE: _session_update,
        rt.INPUT_AUDIO_BUFFER_APPEND: _append,
        rt.INPUT_AUDIO_BUFFER_COMMIT: _commit,
        rt.INPUT_AUDIO_BUFFER_CLEAR: _clear,
        rt.CONVERSATION_ITEM_CREATE: _item_create,
        rt.CONVERSATION_ITEM_RETRIEVE: _item_retrieve,
        rt.CONVERSATION_ITEM_TRUNCATE: _item_truncate,
        rt.CONVERSATION_ITEM_DELETE: _item_delete,
        rt.RESPONSE_CREATE: _response_create,
        rt.RESPONSE_CANCEL: _response_cancel,
        rt.OUTPUT_AUDIO_BUFFER_CLEAR: _output_clear,
        rt.TRANSCRIPTION_SESSION_UPDATE: _transcription_update,
    }

    # --- conversation items -------------------------------------------------------------------------
    def _find(self, item_id: str) -> dict[str, Any] | None:
        return next((i for i in self.items if i["id"] == item_id), None)

    def _require_item(self, item_id: str) -> dict[str, Any]:
        item = self._find(item_id)
        if item is None:
            raise rt.InvalidEvent("item_id", f"no item with id {item_id!r}", "item_not_found")
        return item

    def _insert(self, item: dict[str, Any], previous: str | None = None) -> None:
        """Add an item after `previous` (None: at the end; "root": first) and announce it."""
        if previous is None:
            at = len(self.items)
        else:
            at = 0 if previous == "root" else self.items.index(self._require_item(previous)) + 1
        self.items.insert(at, item)
        before = self.items[at - 1]["id"] if at > 0 else None
        self.emit(rt.CONVERSATION_ITEM_CREATED, previous_item_id=before, item=copy.deepcopy(item))

    # --- audio in, turn detection, transcription ----------------------------------------------------
    def feed_audio(self, pcm16: bytes, rate: int) -> None:
        """Microphone audio from a media track (WebRTC): the same path as input_audio_buffer.append."""
        self._ingest(pcm16, rate)

    def _ingest(self, pcm16: bytes, rate: int) -> None:
        if rate != RATE:
            resampler = self._resamplers.setdefault(rate, audio.Resampler(rate, RATE))
            pcm16 = audio.float_to_pcm16(resampler.process(audio.pcm16_to_float(pcm16)))
        samples = np.frombuffer(pcm16, dtype="<i2")
        self._buffer.extend(pcm16)
        self._received += samples.size
        detection = self.session["turn_detection"]
        if self._vad is None or detection is None:
            return
        for change in self._vad.feed(samples):
            at = self._vad_base + change.sample
            if change.kind == "started":
                self._speech_started(at, detection)
            else:
                self._speech_stopped(at, detection)
        self._transcribe_early(detection)
        if not self._vad.in_speech:  # keep only what a coming onset may still claim as its padding
            keep = RATE * (detection["prefix_padding_ms"] + 200) // 1000
            drop = len(self._buffer) // 2 - keep
            if drop > 0:
                del self._buffer[: drop * 2]
                self._buffer_start += drop

    def _transcribe_early(self, detection: dict[str, Any]) -> None:
        """Start Whisper on the turn so far once a pause begins; forget it if the speaker goes on.

        The audio the turn will commit differs from this only by trailing silence, so the transcript
        stands; Whisper then runs while the VAD waits out the silence duration instead of after it."""
        assert self._vad is not None
        silent = self._vad.silent_ms
        if silent == 0:
            self._early = None
        elif self._early is None and silent >= min(EARLY_TRANSCRIBE_MS, detection["silence_duration_ms"] // 2):
            from gwlab.local.engines import get_transcriber

            self._early = self._spawn(asyncio.to_thread(get_transcriber().transcribe, bytes(self._buffer), RATE))

    def _speech_started(self, at: int, detection: dict[str, Any]) -> None:
        start = max(at - RATE * detection["prefix_padding_ms"] // 1000, self._buffer_start)
        del self._buffer[: (start - self._buffer_start) * 2]
        self._buffer_start = start
        self._speech_item = textgen.new_id("item_")
        self.emit(rt.INPUT_AUDIO_BUFFER_SPEECH_STARTED, audio_start_ms=start * 1000 // RATE,
                  item_id=self._speech_item)
        if self._response is not None and detection.get("interrupt_response", True):
            self._cancel(self._response, "turn_detected")
            self._stop_playback(rt.OUTPUT_AUDIO_BUFFER_CLEARED)

    def _speech_stopped(self, at: int, detection: dict[str, Any]) -> None:
        item_id = self._speech_item or textgen.new_id("item_")
        self.emit(rt.INPUT_AUDIO_BUFFER_SPEECH_STOPPED, audio_end_ms=at * 1000 // RATE, item_id=item_id)
        early, self._early = self._early, None
        self._commit_buffer(item_id, at, early)
        if detection.get("create_response", True) and self._response is None:
            self._spawn(self._start_response(rt.response_options(self.session, None), None))

    def _commit_buffer(self, item_id: str, upto: int, early: asyncio.Task[str] | None = None) -> None:
        """Turn the buffer up to sample `upto` into a user audio item; later audio stays buffered."""
        cut = max(0, upto - self._buffer_start) * 2
        pcm, self._buffer = bytes(self._buffer[:cut]), self._buffer[cut:]
        self._buffer_start = max(upto, self._buffer_start)
        self._speech_item = None
        previous = self.items[-1]["id"] if self.items else None
        self.emit(rt.INPUT_AUDIO_BUFFER_COMMITTED, previous_item_id=previous, item_id=item_id)
        item = {"id": item_id, "object": "realtime.item", "type": "message", "status": "completed",
                "role": "user", "content": [{"type": "input_audio", "transcript": None}]}
        self._audio[item_id] = pcm
        self._insert(item)
        self._transcribe(item, 0, pcm, early)

    def _transcribe(self, item: dict[str, Any], index: int, pcm: bytes,
                    early: asyncio.Task[str] | None = None) -> None:
        """Whisper in a worker thread; the text model needs the words even when nobody asked to see them."""
        from gwlab.local.engines import get_transcriber

        async def run() -> str:
            started = time.perf_counter()
            try:
                text = await (early or asyncio.to_thread(get_transcriber().transcribe, pcm, RATE))
            except Exception as exc:
                log.exception("transcription failed")
                if self.session["input_audio_transcription"] is not None:
                    self.emit(rt.INPUT_TRANSCRIPTION_FAILED, item_id=item["id"], content_index=index,
                              error={"type": "transcription_error", "code": "transcription_failed",
                                     "message": str(exc), "param": None})
                return ""
            if self.session["input_audio_transcription"] is not None:
                item["content"][index]["transcript"] = text
                seconds = round(len(pcm) / 2 / RATE, 3)
                self.emit(rt.INPUT_TRANSCRIPTION_COMPLETED, item_id=item["id"], content_index=index,
                          transcript=text, usage={"type": "duration", "seconds": seconds})
            log.debug("transcribed %.1f s in %.2f s", len(pcm) / 2 / RATE, time.perf_counter() - started)
            return text

        self._heard[item["id"]] = self._spawn(run())

    def _reset_vad(self) -> None:
        detection = self.session["turn_detection"]
        self._vad_base = self._received
        self._speech_item, self._early = None, None
        self._vad = None if detection is None else EnergyVad(RATE, detection["threshold"],
                                                             detection["silence_duration_ms"])

    # --- responses ----------------------------------------------------------------------------------
    async def _start_response(self, options: dict[str, Any], event_id: str | None) -> None:
        if self._response is not None:  # a turn ended while an answer still runs: that answer stands
            return
        response = _Response(textgen.new_id("resp_"), options, event_id)
        self._response = response  # claimed before the first await: one response at a time
        try:
            response.plan = self._plan(options)
            await textgen.prepare(response.plan, {t.name: f"tools[{i}].parameters"
                                                  for i, t in enumerate(response.plan.tools)})
            if self._rate_limit is not None:
                response.rate_limits = self._rate_limit()
        except (APIError, InvalidRequest) as exc:
            self._response = None
            self.emit(rt.ERROR, error=_event_error(exc, event_id))
            return
        self.emit(rt.RESPONSE_CREATED, response=self._response_object(response, "in_progress"))
        response.task = self._spawn(self._run(response))

    def _plan(self, options: dict[str, Any]) -> Plan:
        limit = options["max_output_tokens"]
        tools = tuple(parse_tool(t, f"tools[{i}]") for i, t in enumerate(options["tools"]))
        choice = options["tool_choice"]
        if isinstance(choice, dict):
            mode = textgen.named_choice(tools, choice["name"], "tool_choice.name")
        else:
            mode = ToolChoice(choice if tools else "none")
        return Plan(max_tokens=INF_TOKENS if limit == "inf" else limit, temperature=options["temperature"],
                    tools=tools, choice=mode, call_prefix="call_")

    def _cancel(self, response: _Response, reason: str) -> None:
        if response.task is not None and not response.done:
            response.cancel_reason = reason
            response.task.cancel()

    async def _run(self, response: _Response) -> None:
        try:
            conversation = await self._conversation(response)
            async for event in textgen.generate(conversation, response.plan):
                if isinstance(event, Text):
                    await self._on_text(response, event.text)
                elif isinstance(event, CallStarted):
                    self._add_output(response, {"type": "function_call", "status": "in_progress",
                                                "name": event.call.name, "call_id": event.call.id,
                                                "arguments": ""})
                elif isinstance(event, CallArguments):
                    item = response.output[-1]
                    self.emit(rt.RESPONSE_FUNCTION_CALL_ARGUMENTS_DELTA, response_id=response.id,
                              item_id=item["id"], output_index=len(response.output) - 1,
                              call_id=item["call_id"], delta=event.text)
                elif isinstance(event, Finished):
                    await self._on_finished(response, event)
        except asyncio.CancelledError:
            reason = response.cancel_reason or "client_cancelled"
            self._finish(response, "cancelled", {"type": "cancelled", "reason": reason}, None)
            raise
        except Exception as exc:
            log.exception("realtime response failed")
            code = exc.code if isinstance(exc, APIError) else "server_error"
            error = {"type": "server_error", "code": code, "message": str(exc)}
            self._finish(response, "failed", {"type": "failed", "error": error}, None)
        finally:
            response.done = True
            if self._response is response:
                self._response = None

    async def _conversation(self, response: _Response) -> Conversation:
        """The text model's view: system text, then every message, call and result, spoken ones as text."""
        chosen = response.options["input"]
        items = self.items if chosen is None else [
            self._require_item(i["id"]) if i["type"] == "item_reference" else i for i in chosen]
        conversation = Conversation()
        conversation.add_system(response.options["instructions"])
        for item in items:
            if item["type"] == "function_call":
                conversation.add_assistant("", [textgen.ToolCall(item["call_id"], item["name"],
                                                                 item["arguments"])])
            elif item["type"] == "function_call_output":
                conversation.add_tool_result(item["call_id"], item["output"])
            elif item["role"] == "system":
                conversation.add_system(" ".join(p["text"] for p in item["content"]))
            else:
                words = [await self._words(item, part) for part in item["content"]]
                text = " ".join(w for w in words if w)
                if item["role"] == "user":
                    conversation.add_user(text)
                elif text:
                    conversation.add_assistant(text)
        return conversation

    async def _words(self, item: dict[str, Any], part: dict[str, Any]) -> str:
        if part["type"] in ("input_text", "text"):
            return part["text"]
        if part["type"] == "item_reference":
            referenced = self._find(part["id"])
            return " ".join([await self._words(referenced, p) for p in referenced.get("content", [])]) \
                if referenced else ""
        if part.get("transcript") is not None:
            return part["transcript"]
        heard = self._heard.get(item.get("id", ""))
        if heard is not None:
            return await asyncio.shield(heard)
        if part.get("audio"):  # an inline item of response.input: heard only for this response
            from gwlab.local.engines import get_transcriber

            fmt = self.session["input_audio_format"]
            pcm = audio.decode(base64.b64decode(part["audio"]), fmt)
            return await asyncio.to_thread(get_transcriber().transcribe, pcm, audio.FORMAT_RATES[fmt])
        return ""

    def _add_output(self, response: _Response, fields: dict[str, Any]) -> dict[str, Any]:
        item = {"id": textgen.new_id("item_"), "object": "realtime.item", **fields}
        response.output.append(item)
        index = len(response.output) - 1
        self.emit(rt.RESPONSE_OUTPUT_ITEM_ADDED, response_id=response.id, output_index=index,
                  item=copy.deepcopy(item))
        if response.in_conversation:
            self._insert(item)
        return item

    def _open_message(self, response: _Response) -> None:
        item = self._add_output(response, {"type": "message", "status": "in_progress", "role": "assistant",
                                           "content": []})
        response.part = {"type": "audio", "transcript": ""} if response.speaks else {"type": "text",
                                                                                      "text": ""}
        self.emit(rt.RESPONSE_CONTENT_PART_ADDED, **self._ids(response, item), part=dict(response.part))
        item["content"].append(response.part)

    def _ids(self, response: _Response, item: dict[str, Any]) -> dict[str, Any]:
        return {"response_id": response.id, "item_id": item["id"],
                "output_index": response.output.index(item), "content_index": 0}

    async def _on_text(self, response: _Response, piece: str) -> None:
        if response.part is None:
            self._open_message(response)
        ids = self._ids(response, response.output[-1])
        response.text += piece
        if not response.speaks:
            self.emit(rt.RESPONSE_TEXT_DELTA, **ids, delta=piece)
            return
        self.emit(rt.RESPONSE_AUDIO_TRANSCRIPT_DELTA, **ids, delta=piece)
        response.pending += piece
        pending = response.pending
        pattern = _LATER_BREAK if response.audio_started else _FIRST_BREAK
        breaks = list(pattern.finditer(pending))
        if not breaks and len(pending) > _LONG_CLAUSE:
            breaks = list(_FIRST_BREAK.finditer(pending))
        cut = breaks[-1].end() if breaks else 0
        if not cut and not response.audio_started and len(pending.lstrip().split(" ")) > _FIRST_WORDS:
            cut = pending.rstrip().rfind(" ") + 1
        if cut:
            clause, response.pending = response.pending[:cut], response.pending[cut:]
            await self._speak(response, clause)

    async def _speak(self, response: _Response, text: str) -> None:
        """Synthesise one clause and send it: as audio deltas, or onto the WebRTC track."""
        from gwlab.local.engines import get_speaker

        if not text.strip():
            return
        pcm, rate = await asyncio.to_thread(get_speaker().speak, text, response.options["voice"])
        self._voice_used = True
        ids = self._ids(response, response.output[-1])
        if self._sink is not None:
            pcm24 = await asyncio.to_thread(audio.resample_pcm16, pcm, rate, RATE)
            response.audio.extend(pcm24)
            self._play(response, pcm24)
            return
        fmt = response.options["output_audio_format"]
        out_rate = audio.FORMAT_RATES[fmt]
        data = audio.encode(await asyncio.to_thread(audio.resample_pcm16, pcm, rate, out_rate), fmt)
        response.audio_started = True
        response.audio.extend(data)
        step = out_rate * AUDIO_CHUNK_MS // 1000 * (2 if fmt == "pcm16" else 1)
        for start in range(0, len(data), step):
            chunk = base64.b64encode(data[start:start + step]).decode()
            self.emit(rt.RESPONSE_AUDIO_DELTA, **ids, delta=chunk)

    # --- WebRTC playback: output_audio_buffer.started, then .stopped once played out, or .cleared -----------
    def _play(self, response: _Response, pcm24: bytes) -> None:
        assert self._sink is not None
        if not response.audio_started:
            if self._playback is not None and self._playback is not response:
                self._stop_playback(rt.OUTPUT_AUDIO_BUFFER_CLEARED)
            self.emit(rt.OUTPUT_AUDIO_BUFFER_STARTED, response_id=response.id)
            response.audio_started, self._playback = True, response
        response.playing = True
        self._sink.set_drained(lambda: self._drained(response))
        self._sink.play(pcm24)

    def _drained(self, response: _Response) -> None:
        response.playing = False
        if response.done:  # no more speech will come for it
            self._end_playback(response, rt.OUTPUT_AUDIO_BUFFER_STOPPED)

    def _end_playback(self, response: _Response, kind: str) -> None:
        if response.audio_started and not response.playback_closed:
            response.playback_closed = True
            self.emit(kind, response_id=response.id)
        if self._playback is response:
            self._playback = None

    def _stop_playback(self, kind: str) -> None:
        if self._sink is not None:
            self._sink.clear()
        if self._playback is not None:
            self._playback.playing = False
            self._end_playback(self._playback, kind)

    async def _on_finished(self, response: _Response, finished: Finished) -> None:
        if response.part is None and not finished.calls:
            self._open_message(response)  # nothing said is still an answer: an empty message
        if response.speaks and response.pending.strip():
            clause, response.pending = response.pending, ""
            await self._speak(response, clause)
        self._record_usage(response, finished)
        incomplete = finished.reason == "length"
        details = {"type": "incomplete", "reason": "max_output_tokens"} if incomplete else None
        for call in finished.calls:
            item = next(i for i in response.output if i.get("call_id") == call.id)
            item["arguments"] = call.arguments
            self.emit(rt.RESPONSE_FUNCTION_CALL_ARGUMENTS_DONE, response_id=response.id, item_id=item["id"],
                      output_index=response.output.index(item), call_id=call.id, name=call.name,
                      arguments=call.arguments)
        self._finish(response, "incomplete" if incomplete else "completed", details, finished)

    def _record_usage(self, response: _Response, finished: Finished) -> None:
        used = finished.usage
        self.usage[0] += used.prompt_tokens
        self.usage[1] += used.completion_tokens
        response.usage = {
            "total_tokens": used.prompt_tokens + used.completion_tokens,
            "input_tokens": used.prompt_tokens, "output_tokens": used.completion_tokens,
            "input_token_details": {"cached_tokens": 0, "text_tokens": used.prompt_tokens, "audio_tokens": 0},
            "output_token_details": {"text_tokens": used.completion_tokens, "audio_tokens": 0},
        }

    def _finish(self, response: _Response, status: str, details: dict[str, Any] | None,
                finished: Finished | None) -> None:
        """Close every open part and item, then response.done and rate_limits.updated (§6.5)."""
        item_status = "completed" if status == "completed" else "incomplete"
        response.done = True
        if self._response is response:  # before response.done leaves: the client may answer at once
            self._response = None
        for index, item in enumerate(response.output):
            if item["status"] != "in_progress":
                continue
            if item["type"] == "message" and response.part is not None:
                ids = {"response_id": response.id, "item_id": item["id"], "output_index": index,
                       "content_index": 0}
                if response.speaks:
                    response.part["transcript"] = response.text
                    self.emit(rt.RESPONSE_AUDIO_DONE, **ids)
                    self.emit(rt.RESPONSE_AUDIO_TRANSCRIPT_DONE, **ids, transcript=response.text)
                    self._audio[item["id"]] = bytes(response.audio)
                else:
                    response.part["text"] = response.text
                    self.emit(rt.RESPONSE_TEXT_DONE, **ids, text=response.text)
                self.emit(rt.RESPONSE_CONTENT_PART_DONE, **ids, part=dict(response.part))
            item["status"] = item_status
            self.emit(rt.RESPONSE_OUTPUT_ITEM_DONE, response_id=response.id, output_index=index,
                      item=copy.deepcopy(item))
        body = self._response_object(response, status, details)
        self.emit(rt.RESPONSE_DONE, response=body)
        self.emit(rt.RATE_LIMITS_UPDATED, rate_limits=self._rate_limits(response))
        if self._sink is not None and response.audio_started and not response.playing:  # already played out
            self._end_playback(response, rt.OUTPUT_AUDIO_BUFFER_STOPPED)

    def _response_object(self, response: _Response, status: str,
                         details: dict[str, Any] | None = None) -> dict[str, Any]:
        options = response.options
        return {
            "id": response.id, "object": "realtime.response", "status": status, "status_details": details,
            "output": copy.deepcopy(response.output),
            "conversation_id": self.conversation_id if response.in_conversation else None,
            "modalities": options["modalities"], "voice": options["voice"],
            "output_audio_format": options["output_audio_format"], "temperature": options["temperature"],
            "max_output_tokens": options["max_output_tokens"], "metadata": options["metadata"],
            "usage": response.usage if status in ("completed", "incomplete") else None,
        }

    def _rate_limits(self, response: _Response) -> list[dict[str, Any]]:
        headers = response.rate_limits
        if "x-ratelimit-limit-requests" in headers:
            reset = float(headers["x-ratelimit-reset-requests"].rstrip("s"))
            requests = {"name": "requests", "limit": int(headers["x-ratelimit-limit-requests"]),
                        "remaining": int(headers["x-ratelimit-remaining-requests"]),
                        "reset_seconds": round(reset)}
        else:
            requests = {"name": "requests", "limit": UNLIMITED, "remaining": UNLIMITED, "reset_seconds": 0}
        return [requests, {"name": "tokens", "limit": UNLIMITED, "remaining": UNLIMITED, "reset_seconds": 0}]
