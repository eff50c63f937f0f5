"""Typed realtime server events (gwlab/wire/realtime/events.py): pure parsing, never an exception."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from gwlab.wire.realtime import events as rte


def test_known_events_are_typed_and_keep_raw() -> None:
    data = {"type": "response.text.delta", "event_id": "event_1", "response_id": "resp_1",
            "item_id": "item_1",
            "output_index": 0, "content_index": 0, "delta": "Hi", "novel_field": 7}
    event = rte.parse_event(json.dumps(data))
    assert isinstance(event, rte.TextEvent) and event.delta == "Hi" and event.raw == data


@pytest.mark.parametrize("message", [
    json.dumps({"type": "vendor.new_thing", "event_id": "event_2", "x": 1}),
    json.dumps({"type": "response.done", "event_id": "event_3", "response": "not an object"}),
    json.dumps({"type": "rate_limits.updated", "rate_limits": 5}),
    json.dumps({"type": "response.text.delta", "delta": 42}),
    json.dumps(["not", "an", "event"]),
    "not json at all",
])
def test_unknown_or_misshapen_events_are_kept_raw_never_mistyped(message: str) -> None:
    event = rte.parse_event(message)
    assert isinstance(event, rte.UnknownEvent)
    assert event.raw in (json.loads(message) if message.startswith(("{", "[")) else {"message": message},)


def test_error_event_flattens_error_fields() -> None:
    event = rte.parse_event(json.dumps({"type": "error", "event_id": "event_9", "error": {
        "type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
        "message": "buffer too small",
        "param": None, "event_id": "evt_client_7"}}))
    assert isinstance(event, rte.ErrorEvent)
    assert (event.error_type, event.code, event.related_event_id) == (
        "invalid_request_error", "input_audio_buffer_commit_empty", "evt_client_7")


@dataclass(frozen=True, slots=True)
class _TaggedEvent(rte.RealtimeEvent):
    """An event with fields of annotation types outside str/int/float/None/Mapping."""

    tags: list[str] | None = None
    flagged: bool = False
    detail: Any = None
    spans: tuple[int, ...] = ()


@pytest.fixture
def tagged_type(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(rte._EVENT_CLASSES, "vendor.tagged", _TaggedEvent)
    return "vendor.tagged"


def test_an_event_with_fields_of_other_annotation_types_parses_typed(tagged_type: str) -> None:
    data = {"type": tagged_type, "event_id": "e1", "tags": ["a", "b"], "flagged": True, "detail": [1, {"x": 2}],
            "spans": [1, 2]}
    event = rte.parse_event(json.dumps(data))
    assert isinstance(event, _TaggedEvent)
    assert (event.tags, event.flagged, event.detail, event.spans) == (["a", "b"], True, [1, {"x": 2}], [1, 2])


def test_an_event_whose_other_typed_field_has_the_wrong_json_type_is_kept_raw(tagged_type: str) -> None:
    data = {"type": tagged_type, "tags": "not a list"}
    event = rte.parse_event(json.dumps(data))
    assert isinstance(event, rte.UnknownEvent) and event.raw == data
