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
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from gwlab.errors import InvalidEvent, InvalidRequest
from gwlab.local import textgen
from gwlab.local.errors import APIError
from gwlab.local.realtime.responses import RATE, ActiveResponse, AudioSink, Responses, error_payload
from gwlab.local.realtime.vad import EnergyVad
from gwlab.wire.limits import (
    REALTIME_MAX_APPEND_BYTES,
    REALTIME_MIN_COMMIT_MS,
    REALTIME_SESSION_SECONDS,
)
from gwlab.wire.realtime import audio
from gwlab.wire.realtime import session as rt

log = logging.getLogger("gwlab.local")

BUFFER_CAP_DEFAULT = 10 * 1024 * 1024  # Limits.realtime_buffer_bytes' default
BUFFER_FULL = "input_audio_buffer_full"  # the error event's code when an append would pass the cap
EARLY_TRANSCRIBE_MS = 200  # into a pause, Whisper starts on the turn so far (the VAD's wait hides it)


class ServerSession(Responses):
    """State and behaviour of one session; `send` receives every server event, in order."""

    def __init__(self, send: Callable[[dict[str, Any]], None], *, model: str,
                 config: dict[str, Any] | None = None, audio_sink: AudioSink | None = None,
                 rate_limit: Callable[[], dict[str, str]] | None = None,
                 max_buffer_bytes: int | None = BUFFER_CAP_DEFAULT) -> None:
        self._send, self.model, self._sink, self._rate_limit = send, model, audio_sink, rate_limit
        self._max_buffer = max_buffer_bytes  # uncommitted audio (Limits.realtime_buffer_bytes); None: no cap
        self._overflow_told = False  # WebRTC: one error per overflow, not one per audio frame
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
        self._response: ActiveResponse | None = None
        self._playback: ActiveResponse | None = None  # WebRTC: the response whose speech is on the track
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
            self.emit(rt.ERROR, error=error_payload(exc, event_id))
        except Exception as exc:  # a bug must not end the session: report it and go on
            log.exception("realtime event failed")
            self.emit(rt.ERROR, error={"type": "server_error", "code": "server_error", "param": None,
                                       "message": f"The local gateway failed on this event: {exc}",
                                       "event_id": event_id})

    async def _session_update(self, event: dict[str, Any]) -> None:
        updated = rt.session_update(self.session, event)
        if self._voice_used and updated["voice"] != self.session["voice"]:
            raise InvalidEvent("session.voice" if "session" in event else "voice",
                                  "cannot change once the session has produced audio", "cannot_update_voice")
        relisten = any(updated[k] != self.session[k] for k in ("turn_detection", "input_audio_format"))
        self.session = updated
        if relisten:
            self._reset_vad()
        self.emit(rt.SESSION_UPDATED, session=self.session_object())

    async def _append(self, event: dict[str, Any]) -> None:
        data = rt.audio_bytes(event["audio"], "audio")
        if len(data) > REALTIME_MAX_APPEND_BYTES:
            raise InvalidEvent("audio", f"holds more than {REALTIME_MAX_APPEND_BYTES} bytes of audio")
        fmt = self.session["input_audio_format"]
        if fmt == "pcm16" and len(data) % 2:
            raise InvalidEvent("audio", "pcm16 audio needs an even number of bytes")
        self._ingest(audio.decode(data, fmt), audio.FORMAT_RATES[fmt])

    async def _commit(self, event: dict[str, Any]) -> None:
        if len(self._buffer) // 2 < RATE * REALTIME_MIN_COMMIT_MS // 1000:
            got = len(self._buffer) // 2 / RATE * 1000
            raise InvalidEvent("", f"buffer too small: a commit needs at least {REALTIME_MIN_COMMIT_MS} "
                                  f"ms of audio, got {got:.0f} ms", "input_audio_buffer_commit_empty")
        self._commit_buffer(self._speech_item or textgen.new_id("item_"), self._received)
        self._reset_vad()

    async def _clear(self, event: dict[str, Any]) -> None:
        self._buffer.clear()
        self._buffer_start = self._received
        self._overflow_told = False
        self._reset_vad()
        self.emit(rt.INPUT_AUDIO_BUFFER_CLEARED)

    async def _item_create(self, event: dict[str, Any]) -> None:
        item = rt.item(event["item"])
        previous = event.get("previous_item_id")
        if previous is not None and previous != "root" and self._find(previous) is None:
            raise InvalidEvent("previous_item_id", f"no item with id {previous!r}", "item_not_found")
        if "id" in item and self._find(item["id"]) is not None:
            raise InvalidEvent("item.id", f"an item with id {item['id']!r} already exists",
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
            raise InvalidEvent("item_id", "only assistant message items can be truncated")
        if index >= len(content) or content[index]["type"] != "audio":
            raise InvalidEvent("content_index", f"item {item['id']} has no audio part at index {index}")
        fmt = self.session["output_audio_format"]
        data = self._audio.get(item["id"], b"")
        per_ms = audio.FORMAT_RATES[fmt] // 1000 * (2 if fmt == "pcm16" else 1)
        if end_ms * per_ms > len(data):
            raise InvalidEvent("audio_end_ms", f"is past the end of the item's audio "
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
            raise InvalidEvent("", f"response {self._response.id} is still in progress; cancel it or wait "
                                  "for response.done", "conversation_already_has_active_response")
        options = rt.response_options(self.session, event.get("response"))
        await self._start_response(options, event.get("event_id"))

    async def _response_cancel(self, event: dict[str, Any]) -> None:
        response = self._response
        wanted = event.get("response_id")
        if response is None or (wanted is not None and wanted != response.id):
            raise InvalidEvent("response_id" if wanted else "", "no response in progress to cancel"
                                  + (f" with id {wanted!r}" if wanted else ""), "response_cancel_not_active")
        self._cancel(response, "client_cancelled")

    async def _output_clear(self, event: dict[str, Any]) -> None:
        if self._sink is None:
            raise InvalidEvent("type", "output_audio_buffer.clear exists only over WebRTC")
        playback = self._playback
        self._stop_playback(rt.OUTPUT_AUDIO_BUFFER_CLEARED)
        if playback is None or not playback.audio_started:  # nothing was playing: still answered
            self.emit(rt.OUTPUT_AUDIO_BUFFER_CLEARED, response_id=None)

    async def _transcription_update(self, event: dict[str, Any]) -> None:
        raise InvalidEvent("type", "transcription-only sessions are not served here; use session.update "
                              "with input_audio_transcription")

    _HANDLERS: ClassVar[dict[str, Callable[[ServerSession, dict[str, Any]], Any]]] = {
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
            raise InvalidEvent("item_id", f"no item with id {item_id!r}", "item_not_found")
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
        """Microphone audio from a media track (WebRTC): the same path as input_audio_buffer.append; audio
        past the buffer's cap is dropped, with one error event until the buffer is committed or cleared."""
        try:
            self._ingest(pcm16, rate)
        except InvalidEvent as exc:
            if not self._overflow_told:
                self._overflow_told = True
                self.emit(rt.ERROR, error=error_payload(exc, None))

    def _ingest(self, pcm16: bytes, rate: int) -> None:
        if rate != RATE:
            resampler = self._resamplers.setdefault(rate, audio.Resampler(rate, RATE))
            pcm16 = audio.float_to_pcm16(resampler.process(audio.pcm16_to_float(pcm16)))
        self._check_room(len(pcm16))
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

    def _check_room(self, incoming: int) -> None:
        """Refuse audio that would take the uncommitted buffer past its cap (issue 30: without turn detection
        it grew without bound); the buffer keeps what it had, to be committed or cleared."""
        if self._max_buffer is None or len(self._buffer) + incoming <= self._max_buffer:
            return
        raise InvalidEvent("audio", f"input_audio_buffer would hold more than {self._max_buffer} bytes of "
                              "uncommitted audio (pcm16, 24 kHz): commit it (input_audio_buffer.commit) or "
                              "clear it first", BUFFER_FULL)

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
        self._overflow_told = False
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
