"""The realtime WebSocket fuzzed: random and malformed client events, each answered by one error event,
and the connection stays up (a final valid session.update is still answered).

Every generated event is invalid by construction (random JSON that is not an event, unknown or
near-miss types, known types with a field of the wrong JSON type or value, binary frames, huge strings),
so the claim is exact: n events in, n error events out, none of them a server_error (the session's
catch-all for a bug), then session.updated. Hand-picked invalid events with their expected codes are
in tests/local/test_realtime_websocket.py; this file looks for the ones nobody picked.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from gwlab.wire.realtime.session import CLIENT_EVENTS
from tests.support.gateways import RunningGateway
from tests.support.models import REALTIME_MODEL as REALTIME

Frame = str | bytes
RECEIVE_TIMEOUT = 60  # seconds per event: a server that stops answering fails the case, never hangs it

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
not_null_or_string = st.booleans() | st.integers() | st.floats(allow_nan=False) \
    | st.lists(json_scalars, max_size=3) | st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)
not_a_string = st.none() | not_null_or_string
not_an_object = json_scalars | st.lists(json_scalars, max_size=3)
huge = st.integers(10_000, 200_000).map(lambda n: "x" * n)
known_types = st.sampled_from(sorted(CLIENT_EVENTS))
unknown_types = (st.text(max_size=40) | huge
                 | known_types.map(str.upper) | known_types.map(lambda t: t + ".") | known_types.map(lambda t: t[:-1])
                 ).filter(lambda t: t not in CLIENT_EVENTS)
bad_session = st.sampled_from([
    {"temperature": 9}, {"temperature": "warm"}, {"voice": 5}, {"voice": "robot"}, {"modalities": "text"},
    {"modalities": ["smell"]}, {"turn_detection": {"threshold": 2}}, {"turn_detection": "on"},
    {"tool_choice": "required"}, {"input_audio_format": "mp3"}, {"tools": "all"}, {"max_response_output_tokens": 0},
    {"instructions": 5}, {"bogus_field": True},
])


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


@st.composite
def wrong_fields(draw: st.DrawFn) -> dict[str, Any]:
    """A known event type with one field that cannot be right (or one its type requires, missing)."""
    return draw(st.one_of(
        known_types.flatmap(lambda t: not_null_or_string.map(lambda v: _event(t, event_id=v))),  # null: valid
        not_a_string.map(lambda v: _event("input_audio_buffer.append", audio=v)),
        st.just(_event("input_audio_buffer.append")),
        st.sampled_from(["conversation.item.retrieve", "conversation.item.delete"]).flatmap(
            lambda t: not_a_string.map(lambda v: _event(t, item_id=v))),
        st.integers(max_value=-1).map(lambda n: _event("conversation.item.truncate", item_id="x", content_index=n,
                                                       audio_end_ms=0)),
        (not_an_object | huge).map(lambda v: _event("conversation.item.create", item=v)),
        st.dictionaries(st.sampled_from(["role", "content", "status"]), json_scalars, max_size=3).map(
            lambda item: _event("conversation.item.create", item={"type": "message", **item, "role": 7})),
        (not_null_or_string.filter(lambda v: not isinstance(v, dict)) | huge).map(
            lambda v: _event("session.update", session=v)),
        bad_session.map(lambda s: _event("session.update", session=s)),
        bad_session.map(lambda s: _event("session.update", **s)),
        not_null_or_string.filter(lambda v: not isinstance(v, dict)).map(
            lambda v: _event("response.create", response=v)),
        bad_session.filter(lambda s: "voice" not in s and "input_audio_format" not in s).map(
            lambda s: _event("response.create", response=s)),
        st.just(_event("response.cancel")),  # no response is running
        st.just(_event("input_audio_buffer.commit")),  # the buffer is empty
        st.sampled_from(["transcription_session.update", "output_audio_buffer.clear"]).map(
            lambda t: _event(t, session={})),
    ))


frames: st.SearchStrategy[Frame] = st.one_of(
    json_values.filter(lambda v: not isinstance(v, dict)).map(json.dumps),  # JSON, but not an object
    st.dictionaries(st.text(max_size=8).filter(lambda k: k != "type"), json_values, max_size=4).map(json.dumps),
    st.text(max_size=200).map(lambda t: "{" + t),  # broken JSON (or, rarely, an object without a type)
    st.text(max_size=100).filter(lambda t: not _is_json(t)),
    unknown_types.map(lambda t: json.dumps({"type": t, "event_id": "evt_fuzz"})),
    st.one_of(json_values, not_a_string).filter(lambda v: not isinstance(v, str)).map(
        lambda v: json.dumps({"type": v})),
    wrong_fields().map(json.dumps),
    st.binary(max_size=300),  # events travel in text frames only
    huge.map(lambda s: json.dumps({"type": "conversation.item.create", "item": s})),
)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _receive(ws: Any) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=RECEIVE_TIMEOUT))


SENT: list[int] = []  # frames sent per case


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None,
          derandomize=True)
@given(batch=st.lists(frames, min_size=2, max_size=16))
def test_every_malformed_event_gets_one_error_event_and_the_connection_stays_up(
        gateway: RunningGateway, batch: list[Frame]) -> None:
    url = f"{gateway.base_url.replace('http', 'ws', 1)}/realtime?model={REALTIME}"
    headers = {"Authorization": f"Bearer {gateway.api_key}", "OpenAI-Beta": "realtime=v1"}
    marker = f"still here {uuid.uuid4().hex[:8]}"
    with connect(url, additional_headers=headers, max_size=None, open_timeout=60) as ws:
        for frame in batch:
            ws.send(frame)
        ws.send(json.dumps({"type": "session.update", "session": {"instructions": marker}}))
        errors: list[dict[str, Any]] = []
        while True:
            event = _receive(ws)
            if event["type"] == "error":
                errors.append(event["error"])
            elif event["type"] == "session.updated":
                assert event["session"]["instructions"] == marker
                break
            else:
                assert event["type"] in ("session.created", "conversation.created"), event["type"]
    assert len(errors) == len(batch), [e.get("code") for e in errors]
    SENT.append(len(batch))
    for frame, error in zip(batch, errors, strict=True):
        assert error["type"] != "server_error", error  # the catch-all for a bug in the session
        assert error["code"] and error["message"]
        if isinstance(frame, str) and '"event_id": "evt_fuzz"' in frame:
            assert error["event_id"] == "evt_fuzz"  # an error names the client event it answers


def test_the_realtime_fuzzer_sent_hundreds_of_frames() -> None:
    if not SENT:
        return  # run alone: nothing to add up
    print(f"\nrealtime fuzz: {sum(SENT)} malformed frames over {len(SENT)} connections, {sum(SENT)} error "
          "events, 0 server_error, every connection still answered session.update")
    assert sum(SENT) >= 500
