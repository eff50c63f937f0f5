"""Typed realtime server events (gwlab/wire/realtime_events.py): pure parsing, never an exception."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from gwlab.wire import realtime_events as rte


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
