"""What a realtime console shows, assembled from events: the event log, the transcript, the usage.

Pure (events in, plain dicts out), so it is tested without sockets and serves both transports: the
kernel's WebSocket and the browser's WebRTC data channel feed it the same events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["ConversationView", "summarize"]

LOG_ENTRIES = 100  # newest kept; older ones drop off the end (the whole log is one synced trait)
_JSON_CHARS = 1500  # of one expanded event
_STRING_CHARS = 160  # longer strings (base64 audio, long prompts) are shortened in the log
_AUDIO_FIELDS = frozenset({"audio", "delta"})


def summarize(value: Any, key: str | None = None, *, audio: bool = False) -> Any:
    """`value` fit for the log: audio replaced by its size, long strings cut, structure kept."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        is_audio = isinstance(kind, str) and (kind.startswith("response.audio.") or kind.startswith("input_audio"))
        return {k: summarize(v, k, audio=audio or is_audio) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [summarize(v, key, audio=audio) for v in value]
    if isinstance(value, str):
        if audio and key in _AUDIO_FIELDS:
            return f"<{len(value) * 3 // 4} bytes of audio>"
        if len(value) > _STRING_CHARS:
            return f"{value[:_STRING_CHARS]}… ({len(value)} chars)"
    return value


def _collapses(kind: str) -> bool:
    """Delta floods fold into one line with a count."""
    return kind.endswith(".delta") or kind in ("input_audio_buffer.append", "playback.progress")


class ConversationView:
    """The log (newest first), transcript entries by item, and usage summed over responses."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self._by_item: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "responses": 0}
        self.error = ""
        self._seq = 0

    # -- the log ----------------------------------------------------------------------------------
    def note(self, direction: str, event: Mapping[str, Any]) -> None:
        """Log one event; `direction` is client | server | browser (playback, microphone)."""
        kind = str(event.get("type", "?"))
        stamp = time.strftime("%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}"
        if _collapses(kind):
            # interleaved floods (audio and transcript deltas) fold into one line per type
            for entry in self.log:
                if not _collapses(entry["type"]):
                    break
                if entry["dir"] == direction and entry["type"] == kind:
                    entry["count"] += 1
                    entry["t"] = stamp
                    return
        self._seq += 1
        text = json.dumps(summarize(event), indent=1, ensure_ascii=False, default=str)
        if len(text) > _JSON_CHARS:
            text = text[:_JSON_CHARS] + "\n…"
        self.log.insert(0, {"n": self._seq, "dir": direction, "type": kind, "count": 1, "t": stamp, "json": text})
        del self.log[LOG_ENTRIES:]

    # -- the transcript ---------------------------------------------------------------------------
    def entry(self, item_id: str | None, role: str = "assistant") -> dict[str, Any]:
        key = item_id or f"_{len(self.transcript)}"
        found = self._by_item.get(key)
        if found is None:
            found = {"id": key, "role": role, "text": "", "status": "in_progress"}
            self._by_item[key] = found
            self.transcript.append(found)
        return found

    def server(self, event: Mapping[str, Any]) -> None:
        """Take one server event: log it, then update the transcript and usage it concerns."""
        self.note("server", event)
        kind = event.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, event)

    def _item_created(self, event: Mapping[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, Mapping) or item.get("type") != "message":
            return
        entry = self.entry(item.get("id"), str(item.get("role") or "assistant"))
        for part in item.get("content") or ():
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "text") and part.get("text"):
                entry["text"], entry["status"] = part["text"], "done"

    def _transcribed(self, event: Mapping[str, Any]) -> None:
        entry = self.entry(event.get("item_id"), "user")
        entry["text"], entry["status"] = str(event.get("transcript") or ""), "done"

    def _transcription_failed(self, event: Mapping[str, Any]) -> None:
        self.entry(event.get("item_id"), "user")["status"] = "failed"

    def _delta(self, event: Mapping[str, Any]) -> None:
        entry = self.entry(event.get("item_id"))
        if entry["status"] == "in_progress":
            entry["text"] += str(event.get("delta") or "")

    def _text_done(self, event: Mapping[str, Any]) -> None:
        entry = self.entry(event.get("item_id"))
        final = event.get("transcript", event.get("text"))
        if entry["status"] == "in_progress":
            entry["text"] = str(final if final is not None else entry["text"])
            entry["status"] = "done"

    def _truncated(self, event: Mapping[str, Any]) -> None:
        entry = self.entry(event.get("item_id"))
        entry["status"], entry["heard_ms"] = "interrupted", event.get("audio_end_ms")

    def _response_done(self, event: Mapping[str, Any]) -> None:
        response = got if isinstance(got := event.get("response"), Mapping) else {}
        usage = got if isinstance(got := response.get("usage"), Mapping) else {}
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            if isinstance(usage.get(name), int):
                self.usage[name] += usage[name]
        self.usage["responses"] += 1
        if response.get("status") in ("cancelled", "incomplete", "failed"):
            for item in response.get("output") or ():
                if isinstance(item, Mapping) and item.get("id") in self._by_item:
                    entry = self._by_item[item["id"]]
                    if entry["status"] != "interrupted":
                        entry["status"] = "interrupted" if response.get("status") == "cancelled" else "incomplete"

    def _error(self, event: Mapping[str, Any]) -> None:
        error = got if isinstance(got := event.get("error"), Mapping) else {}
        self.error = f"{error.get('type')}/{error.get('code')}: {error.get('message')}"


_HANDLERS = {
    "conversation.item.created": ConversationView._item_created,
    "conversation.item.input_audio_transcription.completed": ConversationView._transcribed,
    "conversation.item.input_audio_transcription.failed": ConversationView._transcription_failed,
    "response.audio_transcript.delta": ConversationView._delta,
    "response.text.delta": ConversationView._delta,
    "response.audio_transcript.done": ConversationView._text_done,
    "response.text.done": ConversationView._text_done,
    "conversation.item.truncated": ConversationView._truncated,
    "response.done": ConversationView._response_done,
    "error": ConversationView._error,
}
