"""The realtime console's view, pure: events in, log lines, transcript entries and usage out."""

from __future__ import annotations

import base64
import json

from gwlab.widgets._realtime_view import LOG_ENTRIES, ConversationView


def audio_delta(item: str = "item_1") -> dict:
    return {"type": "response.audio.delta", "item_id": item, "content_index": 0,
            "delta": base64.b64encode(b"\x01\x00" * 2400).decode()}


def transcript_delta(text: str, item: str = "item_1") -> dict:
    return {"type": "response.audio_transcript.delta", "item_id": item, "content_index": 0, "delta": text}


def test_interleaved_delta_floods_fold_into_one_line_per_type_with_a_count() -> None:
    view = ConversationView()
    view.server({"type": "response.created", "response": {"id": "r"}})
    for word in ("one ", "two ", "three"):
        view.server(audio_delta())
        view.server(transcript_delta(word))
    assert [(e["type"], e["count"]) for e in view.log] == [
        ("response.audio_transcript.delta", 3), ("response.audio.delta", 3), ("response.created", 1)]
    view.server({"type": "response.done", "response": {"status": "completed"}})
    view.server(audio_delta())  # a new flood after another event starts a new line
    assert [e["type"] for e in view.log[:2]] == ["response.audio.delta", "response.done"]


def test_audio_is_logged_as_its_size_and_long_text_is_cut() -> None:
    view = ConversationView()
    view.server(audio_delta())
    view.note("client", {"type": "conversation.item.create", "item": {"content": [{"text": "x" * 1000}]}})
    assert json.loads(view.log[1]["json"])["delta"] == "<4800 bytes of audio>"
    assert "(1000 chars)" in view.log[0]["json"] and len(view.log[0]["json"]) < 600


def test_the_log_keeps_only_the_newest_entries() -> None:
    view = ConversationView()
    for n in range(LOG_ENTRIES + 10):
        view.note("client", {"type": f"event.{n}"})
    assert len(view.log) == LOG_ENTRIES and view.log[0]["type"] == f"event.{LOG_ENTRIES + 9}"


def test_transcript_follows_items_transcriptions_deltas_and_truncation() -> None:
    view = ConversationView()
    view.server({"type": "conversation.item.created", "item": {
        "id": "u1", "type": "message", "role": "user", "content": [{"type": "input_audio", "transcript": None}]}})
    view.server(transcript_delta("Par", "a1"))
    view.server(transcript_delta("is.", "a1"))
    view.server({"type": "conversation.item.input_audio_transcription.completed", "item_id": "u1",
                 "content_index": 0, "transcript": "Capital of France?"})
    view.server({"type": "conversation.item.truncated", "item_id": "a1", "content_index": 0, "audio_end_ms": 300})
    view.server(transcript_delta(" late", "a1"))  # after the cut: not shown as heard
    assert [(t["id"], t["role"], t["text"], t["status"]) for t in view.transcript] == [
        ("u1", "user", "Capital of France?", "done"), ("a1", "assistant", "Paris.", "interrupted")]
    assert view.transcript[1]["heard_ms"] == 300


def test_usage_sums_responses_and_a_cancelled_response_marks_its_items() -> None:
    view = ConversationView()
    view.server(transcript_delta("Once upon", "a1"))
    view.server({"type": "response.done", "response": {
        "status": "cancelled", "output": [{"id": "a1"}], "usage": {"input_tokens": 7, "output_tokens": 2,
                                                                  "total_tokens": 9}}})
    view.server({"type": "response.done", "response": {
        "status": "completed", "output": [], "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}})
    assert view.usage == {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13, "responses": 2}
    assert view.transcript[0]["status"] == "interrupted"


def test_an_error_event_is_kept_for_display() -> None:
    view = ConversationView()
    view.server({"type": "error", "error": {"type": "invalid_request_error", "code": "bad", "message": "nope"}})
    assert view.error == "invalid_request_error/bad: nope" and view.log[0]["type"] == "error"
