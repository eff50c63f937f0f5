"""Responses of a realtime session: text, speech and function calls from the local engines (§6.5).

A mixin of `ServerSession`, kept apart so each file reads as one concern: the session module handles
client events, items and incoming audio; this one turns the conversation into `response.*` events,
speaks clause by clause, and closes every response with response.done and rate_limits.updated.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gwlab.errors import InvalidRequest
from gwlab.local import catalog, textgen
from gwlab.local.errors import APIError
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text
from gwlab.wire.generation import ToolChoice
from gwlab.wire.limits import PCM16_SAMPLE_RATE
from gwlab.wire.realtime import audio
from gwlab.wire.realtime import session as rt
from gwlab.wire.tools import parse_tool

log = logging.getLogger("gwlab.local")

RATE = PCM16_SAMPLE_RATE  # audio inside a session is pcm16 at 24 kHz, whatever format it travels in
INF_TOKENS = 256  # "inf": a base model left alone loops, and a spoken answer should be short anyway
# "inf" for an answer that speaks: a voice assistant's answer is a sentence or two (about 25 tokens); the
# instructions ask SmolLM2 for that, and this cap bounds the sampled tail (a trial at temperature 0.8 met a
# 158-token answer in 8 questions) to a few sentences; an answer cut here is reported incomplete
VOICE_INF_TOKENS = 64
AUDIO_CHUNK_MS = 200  # size of one response.audio.delta
UNLIMITED = 2**31 - 1  # rate_limits.updated when no limit is configured: nothing to run out of
# the first spoken piece ends at a clause (sooner speech); later ones at a sentence or a long clause
_FIRST_BREAK = re.compile(r"[.!?;:,]\s")
_LATER_BREAK = re.compile(r"[.!?;:]\s")
_LONG_CLAUSE = 80
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
class ActiveResponse:
    """One response from response.create (or a VAD turn) to its response.done."""

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
        return bool(self.options["conversation"] == "auto")


def error_payload(exc: InvalidRequest | APIError, event_id: str | None) -> dict[str, Any]:
    """The `error` of an error event, naming the parameter and the client event that failed."""
    if isinstance(exc, InvalidRequest):
        return {"type": "invalid_request_error", "code": getattr(exc, "code", rt.INVALID_VALUE),
                "message": str(exc), "param": exc.field or None,
                "event_id": getattr(exc, "event_id", None) or event_id}
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    return {"type": exc.type or kind, "code": exc.code or rt.INVALID_VALUE, "message": exc.message,
            "param": exc.param, "event_id": event_id}


class Responses:
    """The response half of `ServerSession`; it relies on the session's emit, items and state."""

    session: dict[str, Any]
    model: str  # the realtime model id the session was opened with
    items: list[dict[str, Any]]
    usage: list[int]
    conversation_id: str
    _sink: AudioSink | None
    _rate_limit: Callable[[], dict[str, str]] | None
    _response: ActiveResponse | None
    _playback: ActiveResponse | None
    _voice_used: bool
    _heard: dict[str, asyncio.Task[str]]
    _audio: dict[str, bytes]
    emit: Callable[..., None]
    _spawn: Callable[[Any], asyncio.Task[Any]]
    _find: Callable[[str], dict[str, Any] | None]
    _require_item: Callable[[str], dict[str, Any]]
    _insert: Callable[..., None]

    # --- responses ----------------------------------------------------------------------------------
    async def _start_response(self, options: dict[str, Any], event_id: str | None) -> None:
        if self._response is not None:  # a turn ended while an answer still runs: that answer stands
            return
        response = ActiveResponse(textgen.new_id("resp_"), options, event_id)
        self._response = response  # claimed before the first await: one response at a time
        try:
            response.plan = self._plan(options)
            await textgen.prepare(response.plan, {t.name: f"tools[{i}].parameters"
                                                  for i, t in enumerate(response.plan.tools)})
            if self._rate_limit is not None:
                response.rate_limits = self._rate_limit()
        except (APIError, InvalidRequest) as exc:
            self._response = None
            self.emit(rt.ERROR, error=error_payload(exc, event_id))
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
        unlimited = VOICE_INF_TOKENS if "audio" in options["modalities"] else INF_TOKENS
        return Plan(max_tokens=unlimited if limit == "inf" else limit, temperature=options["temperature"],
                    tools=tools, choice=mode, call_prefix="call_", reuse_prefix=True,
                    model=catalog.realtime_text_model(self.model))  # the session's model says which

    def _cancel(self, response: ActiveResponse, reason: str) -> None:
        if response.task is not None and not response.done:
            response.cancel_reason = reason
            response.task.cancel()

    async def _run(self, response: ActiveResponse) -> None:
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

    async def _conversation(self, response: ActiveResponse) -> Conversation:
        """The text model's view: system text, then every message, call and result, spoken ones as text."""
        chosen = response.options["input"]
        items = self.items if chosen is None else [
            self._require_item(i["id"]) if i["type"] == "item_reference" else i for i in chosen]
        conversation = Conversation()
        conversation.add_system(response.options["instructions"] or catalog.realtime_instructions(self.model))
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
            text: str = part["text"]  # checked by the client-event validator
            return text
        if part["type"] == "item_reference":
            referenced = self._find(part["id"])
            return " ".join([await self._words(referenced, p) for p in referenced.get("content", [])]) \
                if referenced else ""
        if part.get("transcript") is not None:
            transcript: str = part["transcript"]
            return transcript
        heard = self._heard.get(item.get("id", ""))
        if heard is not None:
            return await asyncio.shield(heard)
        if part.get("audio"):  # an inline item of response.input: heard only for this response
            from gwlab.local.engines import get_transcriber

            fmt = self.session["input_audio_format"]
            pcm = audio.decode(base64.b64decode(part["audio"]), fmt)
            return await asyncio.to_thread(get_transcriber().transcribe, pcm, audio.FORMAT_RATES[fmt])
        return ""

    def _add_output(self, response: ActiveResponse, fields: dict[str, Any]) -> dict[str, Any]:
        item = {"id": textgen.new_id("item_"), "object": "realtime.item", **fields}
        response.output.append(item)
        index = len(response.output) - 1
        self.emit(rt.RESPONSE_OUTPUT_ITEM_ADDED, response_id=response.id, output_index=index,
                  item=copy.deepcopy(item))
        if response.in_conversation:
            self._insert(item)
        return item

    def _open_message(self, response: ActiveResponse) -> None:
        item = self._add_output(response, {"type": "message", "status": "in_progress", "role": "assistant",
                                           "content": []})
        response.part = {"type": "audio", "transcript": ""} if response.speaks else {"type": "text",
                                                                                      "text": ""}
        self.emit(rt.RESPONSE_CONTENT_PART_ADDED, **self._ids(response, item), part=dict(response.part))
        item["content"].append(response.part)

    def _ids(self, response: ActiveResponse, item: dict[str, Any]) -> dict[str, Any]:
        return {"response_id": response.id, "item_id": item["id"],
                "output_index": response.output.index(item), "content_index": 0}

    async def _on_text(self, response: ActiveResponse, piece: str) -> None:
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
        if not cut and not response.audio_started and len(pending.split()) > _FIRST_WORDS:
            cut = max(pending.rstrip().rfind(" "), pending.rstrip().rfind("\n")) + 1
        if cut:
            clause, response.pending = response.pending[:cut], response.pending[cut:]
            await self._speak(response, clause)

    async def _speak(self, response: ActiveResponse, text: str) -> None:
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
    def _play(self, response: ActiveResponse, pcm24: bytes) -> None:
        assert self._sink is not None
        if not response.audio_started:
            if self._playback is not None and self._playback is not response:
                self._stop_playback(rt.OUTPUT_AUDIO_BUFFER_CLEARED)
            self.emit(rt.OUTPUT_AUDIO_BUFFER_STARTED, response_id=response.id)
            response.audio_started, self._playback = True, response
        response.playing = True
        self._sink.set_drained(lambda: self._drained(response))
        self._sink.play(pcm24)

    def _drained(self, response: ActiveResponse) -> None:
        response.playing = False
        if response.done:  # no more speech will come for it
            self._end_playback(response, rt.OUTPUT_AUDIO_BUFFER_STOPPED)

    def _end_playback(self, response: ActiveResponse, kind: str) -> None:
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

    async def _on_finished(self, response: ActiveResponse, finished: Finished) -> None:
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

    def _record_usage(self, response: ActiveResponse, finished: Finished) -> None:
        used = finished.usage
        self.usage[0] += used.prompt_tokens
        self.usage[1] += used.completion_tokens
        response.usage = {
            "total_tokens": used.prompt_tokens + used.completion_tokens,
            "input_tokens": used.prompt_tokens, "output_tokens": used.completion_tokens,
            "input_token_details": {"cached_tokens": 0, "text_tokens": used.prompt_tokens, "audio_tokens": 0},
            "output_token_details": {"text_tokens": used.completion_tokens, "audio_tokens": 0},
        }

    def _finish(self, response: ActiveResponse, status: str, details: dict[str, Any] | None,
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

    def _response_object(self, response: ActiveResponse, status: str,
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

    def _rate_limits(self, response: ActiveResponse) -> list[dict[str, Any]]:
        headers = response.rate_limits
        if "x-ratelimit-limit-requests" in headers:
            reset = float(headers["x-ratelimit-reset-requests"].rstrip("s"))
            requests = {"name": "requests", "limit": int(headers["x-ratelimit-limit-requests"]),
                        "remaining": int(headers["x-ratelimit-remaining-requests"]),
                        "reset_seconds": round(reset)}
        else:
            requests = {"name": "requests", "limit": UNLIMITED, "remaining": UNLIMITED, "reset_seconds": 0}
        return [requests, {"name": "tokens", "limit": UNLIMITED, "remaining": UNLIMITED, "reset_seconds": 0}]
