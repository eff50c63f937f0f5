"""The realtime WebSocket: handshake, text turns, session.update, items, errors (protocols.md §6)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from typing import Any

import httpx
import pytest
import websockets

from gwlab.local.store import hash_secret
from tests.support.realtime import MODEL, b64, connect, session_token, types, ws_url

TEXT_TURN = ["conversation.item.created", "response.created", "response.output_item.added",
             "conversation.item.created", "response.content_part.added"]
TEXT_END = ["response.text.done", "response.content_part.done", "response.output_item.done", "response.done",
            "rate_limits.updated"]


async def refused_status(gateway: Any, **options: Any) -> int:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with connect(gateway, **options):
            pass
    return refused.value.response.status_code


# --- text turns -------------------------------------------------------------------------------------------
async def test_text_turn_follows_the_documented_event_sequence(gateway) -> None:
    async with connect(gateway) as rt:
        events = await rt.turn("What is the capital of France?")
    kinds = types(events)
    deltas = [e for e in events if e["type"] == "response.text.delta"]
    assert kinds == TEXT_TURN + ["response.text.delta"] * len(deltas) + TEXT_END
    done = events[-2]["response"]
    text = "".join(d["delta"] for d in deltas)
    assert text and events[-5]["text"] == text
    assert done["status"] == "completed" and done["output"][0]["content"] == [{"type": "text", "text": text}]
    assert done["usage"]["input_tokens"] > 0 and done["usage"]["output_tokens"] > 0
    assert done["usage"]["total_tokens"] == done["usage"]["input_tokens"] + done["usage"]["output_tokens"]
    item_ids = {e["item"]["id"] for e in events if e["type"] in ("response.output_item.added",
                                                                  "conversation.item.created")}
    assert len(item_ids) == 2  # the user's item, and the assistant's announced twice under one id
    limits = events[-1]["rate_limits"]
    assert {lim["name"] for lim in limits} == {"requests", "tokens"}
    assert all(isinstance(lim[f], int) for lim in limits for f in ("limit", "remaining", "reset_seconds"))
    assert all(e["event_id"].startswith("event_") for e in events)


async def test_second_turn_sees_the_first(gateway) -> None:
    async with connect(gateway) as rt:
        first = (await rt.turn("My name is Ada."))[-2]["response"]
        second = (await rt.turn("What is my name?"))[-2]["response"]
    assert second["status"] == "completed"
    assert second["usage"]["input_tokens"] > first["usage"]["input_tokens"]  # the history is in the prompt


async def test_response_cancel_ends_the_response_as_cancelled(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Write a long story about a dragon."}]}})
        await rt.send({"type": "response.create", "response": {"max_output_tokens": 4096}})
        await rt.send({"type": "response.cancel", "event_id": "cancel_1"})
        events = await rt.until("rate_limits.updated")
        done = events[-2]["response"]
        assert done["status"] == "cancelled"
        assert done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
        assert "error" not in types(events)
        # the session goes on: another turn is served (to its end, or to the token limit if it rambles)
        assert (await rt.turn("Hello!", max_output_tokens=16))[-2]["response"]["status"] in ("completed",
                                                                                            "incomplete")


async def test_second_response_create_during_a_response_is_an_error(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Count to five."}]}})
        await rt.send({"type": "response.create"})
        await rt.send({"type": "response.create", "event_id": "again"})
        events = await rt.until("rate_limits.updated")
        errors = [e["error"] for e in events if e["type"] == "error"]
        assert [(e["code"], e["event_id"]) for e in errors] == [("conversation_already_has_active_response",
                                                                 "again")]


async def test_out_of_band_response_leaves_the_conversation_alone(gateway) -> None:
    async with connect(gateway) as rt:
        events = await rt.turn("Say hi.", conversation="none", metadata={"topic": "greeting"})
        done = events[-2]["response"]
        assert done["conversation_id"] is None and done["metadata"] == {"topic": "greeting"}
        assert types(events).count("conversation.item.created") == 1  # only the user's item


# --- session.update ---------------------------------------------------------------------------------------
SETTINGS = {"instructions": "Answer briefly.", "temperature": 0.4, "voice": "shimmer",
            "max_response_output_tokens": 64,
            "turn_detection": {"type": "server_vad", "threshold": 0.3, "silence_duration_ms": 400},
            "input_audio_transcription": {"model": "whisper-1"}}


@pytest.mark.parametrize("form", ["nested", "top-level"])
async def test_session_update_accepts_nested_and_top_level_forms(gateway, form: str) -> None:
    event = {"type": "session.update", "session": SETTINGS} if form == "nested" else \
        {"type": "session.update", **SETTINGS}
    async with connect(gateway) as rt:
        await rt.send(event)
        session = (await rt.recv())["session"]
    assert session["instructions"] == "Answer briefly." and session["temperature"] == 0.4
    assert session["voice"] == "shimmer" and session["max_response_output_tokens"] == 64
    assert session["turn_detection"] == {"type": "server_vad", "threshold": 0.3, "prefix_padding_ms": 500,
                                         "silence_duration_ms": 400, "create_response": True,
                                         "interrupt_response": True}
    assert session["input_audio_transcription"]["model"] == "whisper-1"


async def test_session_starts_with_the_spec_defaults(gateway) -> None:
    async with connect(gateway) as rt:
        created = rt.seen[0]["session"]
    assert created["modalities"] == ["text"] and created["voice"] == "alloy" and created["temperature"] == 1.0
    assert created["max_response_output_tokens"] == "inf" and created["tool_choice"] == "auto"
    assert created["turn_detection"]["threshold"] == 0.5
    assert created["turn_detection"]["prefix_padding_ms"] == 500
    assert created["turn_detection"]["silence_duration_ms"] == 1000
    assert created["id"].startswith("sess_") and created["object"] == "realtime.session"


OUT_OF_RANGE = [
    ({"temperature": 2.5}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"max_response_output_tokens": 0}, "max_response_output_tokens"),
    ({"max_output_tokens": 4097}, "max_output_tokens"),
    ({"max_output_tokens": "lots"}, "max_output_tokens"),
    ({"turn_detection": {"type": "server_vad", "threshold": 1.5}}, "turn_detection.threshold"),
    ({"turn_detection": {"prefix_padding_ms": 5001}}, "turn_detection.prefix_padding_ms"),
    ({"turn_detection": {"silence_duration_ms": 99}}, "turn_detection.silence_duration_ms"),
    ({"turn_detection": {"type": "semantic_vad"}}, "turn_detection.type"),
    ({"input_audio_format": "mp3"}, "input_audio_format"),
    ({"output_audio_format": "opus"}, "output_audio_format"),
    ({"voice": "verse"}, "voice"),
    ({"modalities": ["text", "video"]}, "modalities[1]"),
    ({"tool_choice": "always"}, "tool_choice"),
    ({"tools": [{"type": "function", "name": "f"}]}, "tools[0].parameters"),
    ({"tools": [{"type": "retrieval", "name": "f", "parameters": {}}]}, "tools[0].type"),
    ({"colour": "blue"}, "colour"),
]


@pytest.mark.parametrize("form", ["nested", "top-level"])
@pytest.mark.parametrize(("fields", "param"), OUT_OF_RANGE, ids=[p for _, p in OUT_OF_RANGE])
async def test_out_of_range_session_values_are_refused_naming_the_param(
        gateway, form: str, fields: dict[str, Any], param: str) -> None:
    event = {"type": "session.update", "event_id": "upd_1"}
    event.update({"session": fields} if form == "nested" else fields)
    async with connect(gateway) as rt:
        await rt.send(event)
        error = (await rt.recv())["error"]
        assert error["param"] == (f"session.{param}" if form == "nested" else param)
        assert error["event_id"] == "upd_1" and error["type"] == "invalid_request_error"
        await rt.send({"type": "session.update", "session": {}})  # nothing changed, nothing dropped
        assert (await rt.recv())["session"]["temperature"] == 1.0


# --- every invalid client event: an error event, and the connection stays ---------------------------------
INVALID = [
    ("{not json", "invalid_json", None, None),
    ("[1, 2]", "invalid_event", None, None),
    ({"event_id": "e1"}, "missing_required_parameter", "type", "e1"),
    ({"type": "no.such.event", "event_id": "e2"}, "unknown_event_type", "type", "e2"),
    ({"type": "session.update", "event_id": 7}, "invalid_type", "event_id", None),
    ({"type": "input_audio_buffer.append", "event_id": "e3"}, "missing_required_parameter", "audio", "e3"),
    ({"type": "input_audio_buffer.append", "event_id": "e4", "audio": "%%%"}, "invalid_value", "audio", "e4"),
    ({"type": "input_audio_buffer.append", "event_id": "e5", "audio": b64(b"\x01\x02\x03")}, "invalid_value",
     "audio", "e5"),
    ({"type": "input_audio_buffer.append", "event_id": "e6", "audio": 12}, "invalid_type", "audio", "e6"),
    ({"type": "input_audio_buffer.commit", "event_id": "e7"}, "input_audio_buffer_commit_empty", None, "e7"),
    ({"type": "conversation.item.create", "event_id": "e8"}, "missing_required_parameter", "item", "e8"),
    ({"type": "conversation.item.create", "event_id": "e9", "item": {"type": "message", "role": "robot",
                                                                     "content": []}},
     "invalid_value", "item.role", "e9"),
    ({"type": "conversation.item.create", "event_id": "e10", "item": {"type": "message", "role": "user",
                                                                      "content": "hi"}},
     "invalid_type", "item.content", "e10"),
    ({"type": "conversation.item.create", "event_id": "e11",
      "item": {"type": "message", "role": "user", "content": [{"type": "text", "text": "x"}]}},
     "invalid_value", "item.content[0].type", "e11"),
    ({"type": "conversation.item.create", "event_id": "e12", "item": {"type": "function_call_output",
                                                                      "output": "42"}},
     "missing_required_parameter", "item.call_id", "e12"),
    ({"type": "conversation.item.create", "event_id": "e13", "previous_item_id": "item_none",
      "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}},
     "item_not_found", "previous_item_id", "e13"),
    ({"type": "conversation.item.retrieve", "event_id": "e14", "item_id": "item_none"}, "item_not_found",
     "item_id", "e14"),
    ({"type": "conversation.item.delete", "event_id": "e15"}, "missing_required_parameter", "item_id", "e15"),
    ({"type": "conversation.item.truncate", "event_id": "e16", "item_id": "x", "content_index": 0,
      "audio_end_ms": -1}, "invalid_value", "audio_end_ms", "e16"),
    ({"type": "response.cancel", "event_id": "e17"}, "response_cancel_not_active", None, "e17"),
    ({"type": "response.create", "event_id": "e18", "response": {"temperature": 3}}, "invalid_value",
     "response.temperature", "e18"),
    ({"type": "response.create", "event_id": "e19", "response": {"modalities": "text"}}, "invalid_type",
     "response.modalities", "e19"),
    ({"type": "response.create", "event_id": "e20", "response": {"tool_choice": "required"}}, "invalid_value",
     "response.tool_choice", "e20"),
    ({"type": "session.update", "event_id": "e21", "session": {"voice": None}}, "invalid_type",
     "session.voice", "e21"),
    ({"type": "output_audio_buffer.clear", "event_id": "e22"}, "invalid_value", "type", "e22"),
    ({"type": "transcription_session.update", "event_id": "e23", "session": {}}, "invalid_value", "type",
     "e23"),
]


@pytest.mark.parametrize(("event", "code", "param", "event_id"), INVALID,
                         ids=[f"{i}-{c}" for i, (_, c, _, _) in enumerate(INVALID)])
async def test_every_invalid_event_gets_an_error_event_and_the_connection_stays(
        gateway, event: Any, code: str, param: str | None, event_id: str | None) -> None:
    async with connect(gateway) as rt:
        await rt.send(event if isinstance(event, str) else json.dumps(event))
        answer = await rt.recv()
        assert answer["type"] == "error" and answer["event_id"].startswith("event_")
        error = answer["error"]
        assert (error["code"], error["param"], error["event_id"]) == (code, param, event_id)
        assert error["type"] and error["message"]
        await rt.send({"type": "session.update", "session": {"instructions": "still here"}})
        assert (await rt.recv())["session"]["instructions"] == "still here"


async def test_a_binary_frame_is_answered_with_an_error(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.ws.send(b"\x00\x01")
        assert (await rt.recv())["error"]["code"] == "invalid_event"
        await rt.send({"type": "input_audio_buffer.clear"})
        assert (await rt.recv())["type"] == "input_audio_buffer.cleared"


# --- conversation items -----------------------------------------------------------------------------------
async def test_items_are_created_in_place_retrieved_and_deleted(gateway) -> None:
    def message(item_id: str, text: str) -> dict[str, Any]:
        return {"id": item_id, "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}

    async with connect(gateway) as rt:
        await rt.send({"type": "conversation.item.create", "item": message("item_b", "second")})
        assert (await rt.recv())["previous_item_id"] is None
        await rt.send({"type": "conversation.item.create", "previous_item_id": "root",
                       "item": message("item_a", "first")})
        created = await rt.recv()
        assert created["item"]["id"] == "item_a" and created["previous_item_id"] is None
        assert created["item"]["object"] == "realtime.item" and created["item"]["status"] == "completed"
        await rt.send({"type": "conversation.item.retrieve", "item_id": "item_b"})
        retrieved = await rt.recv()
        assert retrieved["type"] == "conversation.item.retrieved"
        assert retrieved["item"]["content"] == [{"type": "input_text", "text": "second"}]
        await rt.send({"type": "conversation.item.delete", "item_id": "item_a", "event_id": "del"})
        assert await rt.recv() | {"event_id": None} == {"type": "conversation.item.deleted",
                                                         "item_id": "item_a", "event_id": None}
        await rt.send({"type": "conversation.item.create", "item": message("item_b", "again")})
        assert (await rt.recv())["error"]["code"] == "duplicate_item_id"
        await rt.send({"type": "conversation.item.truncate", "item_id": "item_b", "content_index": 0,
                       "audio_end_ms": 0})
        assert (await rt.recv())["error"]["param"] == "item_id"  # a user item has no audio to cut


# --- the handshake ----------------------------------------------------------------------------------------
async def test_browser_subprotocols_authenticate_and_are_answered_with_realtime(gateway) -> None:
    protocols = ["realtime", f"openai-insecure-api-key.{gateway.api_key}", "openai-beta.realtime-v1"]
    async with connect(gateway, headers={}, subprotocols=protocols) as rt:
        assert rt.ws.subprotocol == "realtime"
        done = (await rt.turn("Hi!", max_output_tokens=16))[-2]
        # served: the answer ran to its end or to the token limit (a sampled base model may ramble)
        assert done["type"] == "response.done" and done["response"]["status"] in ("completed", "incomplete")


async def test_no_subprotocol_is_required(gateway) -> None:
    async with connect(gateway) as rt:
        assert rt.ws.subprotocol is None


@pytest.mark.parametrize(("options", "status"), [
    ({"key": "gwl_not_a_real_key"}, 401),
    ({"headers": {"OpenAI-Beta": "realtime=v1"}}, 401),
    ({"headers": {"Authorization": "Basic abc", "OpenAI-Beta": "realtime=v1"}}, 401),
    ({"subprotocols": ["realtime", "openai-insecure-api-key.gwl_wrong", "openai-beta.realtime-v1"],
      "headers": {}}, 401),
    ({"key": "ek_never_issued"}, 401),
    ({"model": "local/no-such-model"}, 404),
    ({"model": "local/gemma-3-270m"}, 400),
    ({"model": None}, 400),
], ids=["wrong-key", "no-key", "malformed-header", "wrong-subprotocol-key", "unknown-ephemeral",
        "unknown-model", "model-without-realtime", "no-model"])
async def test_bad_credentials_or_models_are_refused_at_the_handshake(gateway, options: dict[str, Any],
                                                                      status: int) -> None:
    assert await refused_status(gateway, **options) == status


async def test_missing_beta_header_is_refused(gateway) -> None:
    status = await refused_status(gateway, headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert status == 400


async def test_a_key_limited_to_other_models_is_refused_with_403(gateway) -> None:
    # a fresh name per call: key names are unique in the gateway's database, and a repeated run shares it
    key = gateway.create_key(f"realtime-no-access-{uuid.uuid4().hex[:8]}", models="local/gemma-3-270m")
    assert await refused_status(gateway, key=key) == 403


# --- ephemeral tokens -------------------------------------------------------------------------------------
async def test_session_endpoint_returns_an_ephemeral_token_valid_for_a_minute(gateway) -> None:
    body = session_token(gateway, voice="echo", instructions="Be brief.")
    secret = body["client_secret"]
    assert secret["value"].startswith("ek_") and body["object"] == "realtime.session"
    assert abs(secret["expires_at"] - time.time() - 60) < 30  # a minute, give or take a slow machine
    assert body["voice"] == "echo" and body["model"] == MODEL and "ek_" not in json.dumps(
        {k: v for k, v in body.items() if k != "client_secret"})


async def test_ephemeral_token_opens_exactly_one_connection(gateway) -> None:
    body = session_token(gateway, voice="shimmer", instructions="Be brief.")
    token = body["client_secret"]["value"]
    async with connect(gateway, key=token) as rt:
        created = rt.seen[0]["session"]
        assert created["id"] == body["id"] and created["voice"] == "shimmer"
        assert created["instructions"] == "Be brief."
    assert await refused_status(gateway, key=token) == 401


async def test_ephemeral_token_works_as_a_subprotocol_key(gateway) -> None:
    token = session_token(gateway)["client_secret"]["value"]
    protocols = ["realtime", f"openai-insecure-api-key.{token}", "openai-beta.realtime-v1"]
    async with connect(gateway, headers={}, subprotocols=protocols) as rt:
        assert rt.ws.subprotocol == "realtime"


async def test_expired_ephemeral_token_is_refused(gateway) -> None:
    token = session_token(gateway)["client_secret"]["value"]
    # expire it in the gateway's own database: no clock to fake, no wait
    with sqlite3.connect(gateway.db) as db:
        db.execute("UPDATE ephemeral_tokens SET expires_at = 0 WHERE hash = ?", (hash_secret(token),))
    assert await refused_status(gateway, key=token) == 401


async def test_ephemeral_token_for_another_model_is_refused(gateway) -> None:
    token = session_token(gateway)["client_secret"]["value"]
    assert await refused_status(gateway, key=token, model="local/gemma-3-270m") == 401


def test_session_endpoint_refuses_bad_configuration_and_long_lived_auth_only(gateway) -> None:
    auth, url = {"Authorization": f"Bearer {gateway.api_key}"}, f"{gateway.base_url}/realtime/sessions"
    r = httpx.post(url, json={"model": MODEL, "temperature": 9}, headers=auth)
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = httpx.post(url, json={"model": "local/gemma-3-270m"}, headers=auth)
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    r = httpx.post(url, json={"model": MODEL})
    assert r.status_code == 401


def test_ws_url_helper_matches_the_spec_address(gateway) -> None:
    assert ws_url(gateway).endswith(f"/v1/realtime?model={MODEL}")


async def test_one_sessions_generation_does_not_block_another_session(gateway) -> None:
    arrivals: list[tuple[str, str]] = []  # (connection, event type) in the order they arrived

    async def record(name: str, rt: Any, until: str) -> None:
        while (event := await rt.recv())["type"] != until:
            arrivals.append((name, event["type"]))
        arrivals.append((name, until))

    # SmolLM2 asked greedily writes this story to the 300-token cap every time (Gemma stops after ~10
    # tokens), so the overlap never depends on a sampled answer's length
    async with connect(gateway, model="local/realtime-smollm2-135m-instruct") as busy:
        await busy.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Write a long story about a lighthouse."}]}})
        await busy.send({"type": "response.create", "response": {"max_output_tokens": 300, "temperature": 0}})
        await busy.until("response.output_item.added")  # the model is generating now
        reader = asyncio.create_task(record("busy", busy, "response.done"))
        async with connect(gateway) as other:  # a whole handshake and an update meanwhile
            await other.send({"type": "session.update", "session": {"instructions": "hi"}})
            await record("other", other, "session.updated")
        await reader
    usage = busy.seen[-1]["response"]["usage"]
    assert usage["output_tokens"] == 300, "the story should have run to its cap"
    assert arrivals.index(("other", "session.updated")) < arrivals.index(("busy", "response.done")), \
        "a long generation held up another session's events"
