"""Realtime client: pure parts, and fault injection against a tiny in-test WebSocket peer.

The peer is used only to inject faults (drops, refused handshakes, error events, unknown events);
conversations themselves are tested against the real local gateway in test_realtime_client_live.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.protocol import State

from gwlab.client import realtime as rt
from gwlab.client.ledger import RealtimeErrorEntry
from gwlab.client.realtime.session import _TurnBuilder
from gwlab.client.transport.core import AsyncTransport
from gwlab.errors import (
    AuthenticationFailed,
    ConnectionFailed,
    InvalidRequest,
    PermissionDenied,
    StreamError,
    StreamInterrupted,
    Timeout,
)
from gwlab.wire.realtime import events as rte
from tests.support import free_port, wait_until_async
from tests.support.models import REALTIME_MODEL

MODEL = REALTIME_MODEL
KEY = "gw-test-key-not-secret-0123456789"


def make_realtime(base_url: str, key: str) -> rt.AsyncRealtime:
    """The realtime family over the real transport, pointed at `base_url`."""
    return rt.AsyncRealtime(AsyncTransport(base_url, key))


def saved_realtime_errors(realtime: rt.AsyncRealtime) -> list[RealtimeErrorEntry]:
    """The realtime errors the ledger holds now."""
    return realtime.ledger.realtime_errors()


# --- the fault-injecting peer --------------------------------------------------------------------
@dataclass
class Peer:
    base_url: str
    requests: list[Any] = field(default_factory=list)  # handshake requests, refused ones included
    received: list[list[dict[str, Any]]] = field(default_factory=list)  # client events, per connection


@contextlib.asynccontextmanager
async def fake_peer(script: Callable[[ServerConnection, int, Peer], Any],
                    refuse: Callable[[int], HTTPStatus | None] = lambda attempt: None,
                    refusal: tuple[str, dict[str, str]] | None = None) -> AsyncIterator[Peer]:
    """A WebSocket server running `script(ws, connection_number, peer)` for each accepted connection;
    a refused handshake answers `refusal` (body, headers) when given, else the status phrase."""
    peer = Peer(base_url="")

    def process_request(connection: ServerConnection, request: Any) -> Any:
        peer.requests.append(request)
        status = refuse(len(peer.requests))
        if not status:
            return None
        response = connection.respond(status, refusal[0] if refusal else f"{status.phrase}\n")
        for name, value in (refusal[1] if refusal else {}).items():
            if name in response.headers:
                del response.headers[name]
            response.headers[name] = value
        return response

    async def handler(ws: ServerConnection) -> None:
        peer.received.append([])
        await script(ws, len(peer.received), peer)

    async with serve(handler, "127.0.0.1", 0, process_request=process_request) as server:
        port = server.sockets[0].getsockname()[1]
        peer.base_url = f"http://127.0.0.1:{port}/v1"
        yield peer


async def receive(ws: ServerConnection, peer: Peer) -> dict[str, Any]:
    event = json.loads(await ws.recv())
    peer.received[-1].append(event)
    return event


async def send(ws: ServerConnection, event_type: str, **fields: Any) -> None:
    await ws.send(json.dumps({"type": event_type, "event_id": f"event_{id(fields)}", **fields}))


async def hold_open(ws: ServerConnection, peer: Peer) -> None:
    """Record whatever the client sends until it leaves."""
    with contextlib.suppress(Exception):
        while True:
            await receive(ws, peer)


def drop(ws: ServerConnection) -> None:
    """Cut the TCP connection without a close frame: what a network failure looks like (1006)."""
    ws.transport.abort()


async def eventually(condition: Callable[[], Any], timeout: float = 10.0) -> None:
    await wait_until_async(condition, timeout=timeout, interval=0.01)



# --- addressing ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("base_url", "url"), [
    ("http://127.0.0.1:8000/v1", "ws://127.0.0.1:8000/v1/realtime?model=local%2Frealtime-gemma-3-270m"),
    ("http://127.0.0.1:8000/v1/", "ws://127.0.0.1:8000/v1/realtime?model=local%2Frealtime-gemma-3-270m"),
    ("https://gw.example/v1", "wss://gw.example/v1/realtime?model=local%2Frealtime-gemma-3-270m"),
    ("https://gw.example", "wss://gw.example/v1/realtime?model=local%2Frealtime-gemma-3-270m"),
])
def test_websocket_url_comes_from_the_base_url_with_v1_exactly_once(base_url: str, url: str) -> None:
    assert rt.realtime_url(base_url, MODEL) == url


def test_webrtc_url_keeps_http_and_v1_once() -> None:
    assert rt.realtime_url("https://gw.example/v1", "m 1", websocket=False) == "https://gw.example/v1/realtime?model=m%201"


# --- turns: pure assembly ------------------------------------------------------------------------
def _events(*dicts: dict[str, Any]) -> list[rt.ServerEvent]:
    return [rt.parse_event(json.dumps({"event_id": f"event_{i}", **d})) for i, d in enumerate(dicts)]


def _turn(events: list[rt.ServerEvent], fmt: str = "pcm16") -> tuple[rt.Turn, bool]:
    builder = _TurnBuilder(fmt)
    done = False
    for event in events:
        done = builder.add(event)
        if done:
            break
    return builder.finish(), done


IDS = {"response_id": "resp_1", "item_id": "item_1", "output_index": 0, "content_index": 0}


def test_turn_collects_text_transcript_audio_and_usage_and_completes_on_completed() -> None:
    turn, done = _turn(_events(
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.text.delta", **IDS, "delta": "Hel"},
        {"type": "response.text.delta", **IDS, "delta": "lo"},
        {"type": "response.audio_transcript.delta", **IDS, "content_index": 1, "delta": "Hello"},
        {"type": "response.audio.delta", **IDS, "content_index": 1, "delta": "AAECAw=="},
        {"type": "response.audio.delta", **IDS, "content_index": 1, "delta": "BAU="},
        {"type": "response.done", "response": {"id": "resp_1", "status": "completed",
                                               "usage": {"total_tokens": 5}}},
    ))
    assert done and turn.is_complete and turn.status == "completed"
    assert (turn.text, turn.transcript, turn.audio) == ("Hello", "Hello", b"\x00\x01\x02\x03\x04\x05")
    assert turn.usage == {"total_tokens": 5} and turn.response_id == "resp_1"


@pytest.mark.parametrize("status", ["incomplete", "cancelled", "failed"])
def test_turn_ended_with_another_status_is_not_complete(status: str) -> None:
    turn, done = _turn(_events({"type": "response.created", "response": {"id": "resp_1"}},
                               {"type": "response.done", "response": {"id": "resp_1", "status": status}}))
    assert done and not turn.is_complete and turn.status == status


def test_turn_without_response_done_is_not_complete() -> None:
    turn, done = _turn(_events({"type": "response.created", "response": {"id": "resp_1"}},
                               {"type": "response.text.delta", **IDS, "delta": "Hel"}))
    assert not done and not turn.is_complete and turn.text == "Hel"


def test_turn_done_text_replaces_its_deltas_and_function_calls_are_gathered() -> None:
    turn, _ = _turn(_events(
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.text.delta", **IDS, "delta": "Hel"},
        {"type": "response.text.done", **IDS, "text": "Hello."},
        {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 1,
         "item": {"id": "item_2", "type": "function_call", "call_id": "call_1", "name": "lookup",
                  "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "response_id": "resp_1", "item_id": "item_2",
         "output_index": 1, "call_id": "call_1", "delta": '{"city": '},
        {"type": "response.function_call_arguments.done", "response_id": "resp_1", "item_id": "item_2",
         "output_index": 1, "call_id": "call_1", "arguments": '{"city": "Oslo"}'},
        {"type": "response.done", "response": {"id": "resp_1", "status": "completed"}},
    ))
    assert turn.text == "Hello."
    assert turn.function_calls == [rt.FunctionCall("call_1", "lookup", '{"city": "Oslo"}', "item_2")]
    assert turn.function_calls[0].parsed_arguments() == {"city": "Oslo"}


def test_turn_pcm16_decodes_g711_audio() -> None:
    turn = rt.Turn(audio=b"\xff\x80", audio_format="g711_ulaw")
    assert turn.pcm16 == (0).to_bytes(2, "little", signed=True) + (32124).to_bytes(2, "little", signed=True)


# --- secrets -------------------------------------------------------------------------------------
def test_ephemeral_token_value_never_appears_in_its_repr() -> None:
    token = rt.EphemeralToken.from_wire({"model": MODEL, "client_secret": {"value": "ek_supersecret",
                                                                            "expires_at": 4102444800}})
    assert token.value == "ek_supersecret" and "ek_supersecret" not in repr(token) + str(token)
    assert not token.is_expired


async def test_connection_repr_does_not_show_the_key() -> None:
    connection = make_realtime("http://127.0.0.1:1/v1", KEY).connect(MODEL)
    assert KEY not in repr(connection)


# --- strict writer -------------------------------------------------------------------------------
@pytest.mark.parametrize(("config", "field_name"), [({"temperature": 3.0}, "session.temperature"),
                                                    ({"voice": "nobody"}, "session.voice"),
                                                    ({"modalitiez": ["text"]}, "session.modalitiez")])
def test_session_config_is_validated_before_connecting(config: dict[str, Any], field_name: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        make_realtime("http://127.0.0.1:1/v1", KEY).connect(MODEL, session=config)
    assert info.value.field == field_name


# --- fault injection: reconnects -----------------------------------------------------------------
async def test_dropped_connection_reconnects_within_budget_and_resends_the_session() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await receive(ws, peer)  # session.update
        await send(ws, "session.created", session={"id": f"sess_{n}"})
        if n < 3:
            drop(ws)
            return
        await send(ws, "vendor.hello", n=n)
        await hold_open(ws, peer)

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(
            MODEL, session={"instructions": "Be brief."}, max_reconnects=2) as conn:
        seen = [await conn.recv(timeout=10) for _ in range(4)]
        assert conn.reconnects == 2
    assert [e.type for e in seen] == ["session.created"] * 3 + ["vendor.hello"]
    assert [e.session["id"] for e in seen[:3]] == ["sess_1", "sess_2", "sess_3"]
    sent = [events[0] for events in peer.received]
    assert [e["type"] for e in sent] == ["session.update"] * 3
    assert all(e["session"] == {"instructions": "Be brief."} for e in sent)


async def test_drops_beyond_the_budget_end_the_stream_with_connection_failed() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await send(ws, "session.created", session={})
        drop(ws)

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(
            MODEL, max_reconnects=1) as conn:
        with pytest.raises(ConnectionFailed):
            async for _ in conn:
                pass
    assert len(peer.requests) == 2


@pytest.mark.parametrize(("status", "error"), [(HTTPStatus.UNAUTHORIZED, AuthenticationFailed),
                                               (HTTPStatus.FORBIDDEN, PermissionDenied)])
async def test_refused_authentication_is_never_retried(status: HTTPStatus, error: type[Exception]) -> None:
    async with fake_peer(hold_open, refuse=lambda attempt: status) as peer:
        realtime = make_realtime(peer.base_url, KEY)
        with pytest.raises(error) as info:
            async with realtime.connect(MODEL, max_reconnects=3):
                pass
    assert info.value.status == status and len(peer.requests) == 1
    (row,) = realtime.ledger.entries()
    assert (row.method, row.path, row.family, row.status, row.complete) == ("GET", "/realtime", "realtime",
                                                                            status, False)
    assert KEY not in str(info.value)
    request = peer.requests[0]
    assert request.path == "/v1/realtime?model=local%2Frealtime-gemma-3-270m"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["OpenAI-Beta"] == "realtime=v1"


async def test_a_refused_handshake_carries_the_gateways_message_and_any_listed_request_id_header() -> None:
    body = json.dumps({"error": {"message": "model not allowed for this key", "type": "permission_error"}})
    refusal = (body, {"Content-Type": "application/json", "request-id": "req_rt_403"})
    async with fake_peer(hold_open, refuse=lambda attempt: HTTPStatus.FORBIDDEN, refusal=refusal) as peer:
        realtime = make_realtime(peer.base_url, KEY)
        with pytest.raises(PermissionDenied) as info:
            async with realtime.connect(MODEL):
                pass
    assert info.value.request_id == "req_rt_403" and "model not allowed for this key" in str(info.value)
    (row,) = realtime.ledger.entries()
    assert row.request_id == "req_rt_403"


async def test_a_503_at_the_handshake_is_retried_within_the_budget() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await send(ws, "session.created", session={})
        await hold_open(ws, peer)

    refuse = lambda attempt: HTTPStatus.SERVICE_UNAVAILABLE if attempt == 1 else None  # noqa: E731
    async with fake_peer(script, refuse=refuse) as peer, make_realtime(peer.base_url, KEY).connect(
            MODEL, max_reconnects=1) as conn:
        assert (await conn.recv(timeout=10)).type == "session.created"
        assert conn.reconnects == 1 and len(peer.requests) == 2


async def test_a_refused_tcp_connection_is_retried_then_reported() -> None:
    realtime = make_realtime(f"http://127.0.0.1:{free_port()}/v1", KEY)
    with pytest.raises(ConnectionFailed) as info:
        async with realtime.connect(MODEL, max_reconnects=1):
            pass
    assert "handshake failed" in str(info.value) and KEY not in str(info.value)


async def test_a_normal_close_by_the_server_ends_iteration_without_reconnecting() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await send(ws, "session.created", session={})
        await ws.close(1000, "session over")

    async with fake_peer(script) as peer:
        realtime = make_realtime(peer.base_url, KEY)
        async with realtime.connect(MODEL) as conn:
            assert [e.type async for e in conn] == ["session.created"]
            assert await conn.recv(timeout=1) is None  # and it stays ended
    assert len(peer.requests) == 1
    (row,) = realtime.ledger.entries()  # the session is one call in the ledger
    assert (row.status, row.model, row.streamed, row.complete, row.error) == (101, MODEL, True, True, None)


async def test_a_policy_close_is_a_session_failure_and_not_reconnected() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await ws.close(1008, "session expired")

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(MODEL) as conn:
        with pytest.raises(ConnectionFailed, match="1008"):
            await conn.recv(timeout=10)
    assert len(peer.requests) == 1


async def test_sends_during_a_drop_wait_for_the_new_socket_after_the_session_update() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await receive(ws, peer)  # session.update
        if n == 1:
            drop(ws)
            return
        await send(ws, "session.created", session={})
        await hold_open(ws, peer)

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(
            MODEL, session={"voice": "echo"}) as conn:
        # wait until the client has seen the drop, not a fixed 50 ms: an event written to a socket the peer
        # has cut but the client has not yet seen closed is lost with it (WebSocket has no acknowledgement)
        dropped = conn._ws
        await eventually(lambda: dropped is not None and dropped.state is State.CLOSED)
        await conn.send_text("still there?")
        assert (await conn.recv(timeout=10)).type == "session.created"
        await eventually(lambda: len(peer.received) == 2 and len(peer.received[1]) == 2)
    assert [e["type"] for e in peer.received[1]] == ["session.update", "conversation.item.create"]


async def test_turn_cut_by_a_drop_raises_stream_interrupted_with_the_partial_turn() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        if n == 1:
            await send(ws, "response.created", response={"id": "resp_1", "status": "in_progress"})
            await send(ws, "response.text.delta", **IDS, delta="Half an ans")
            await asyncio.sleep(0.05)
            drop(ws)
            return
        await hold_open(ws, peer)

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(MODEL) as conn:
        with pytest.raises(StreamInterrupted) as info:
            await conn.turn(timeout=10)
    assert info.value.partial.text == "Half an ans" and not info.value.partial.is_complete


async def test_a_stalled_turn_times_out_as_interrupted_with_what_arrived() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await send(ws, "response.created", response={"id": "resp_1", "status": "in_progress"})
        await send(ws, "response.text.delta", **IDS, delta="Thinking")
        await hold_open(ws, peer)  # and then nothing: no response.done

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(MODEL) as conn:
        with pytest.raises(StreamInterrupted, match=r"no response\.done within 0\.5 s") as info:
            await conn.turn(timeout=0.5)
        with pytest.raises(Timeout):
            await conn.recv(timeout=0.1)
    assert info.value.partial.text == "Thinking" and not info.value.partial.is_complete


# --- fault injection: error events ---------------------------------------------------------------
async def test_error_event_is_saved_with_its_client_event_before_anything_is_resent() -> None:
    ledger_at_resend: list[list[RealtimeErrorEntry]] = []
    holder: dict[str, Any] = {}

    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await receive(ws, peer)  # session.update
        if n == 1:
            create = await receive(ws, peer)
            await send(ws, "error", error={"type": "invalid_request_error", "code": "commit_empty",
                                           "message": "buffer too small", "param": None,
                                           "event_id": create["event_id"]})
            drop(ws)
            return
        # the re-sent session.update has just arrived: what does the ledger hold at this moment?
        ledger_at_resend.append(saved_realtime_errors(holder["realtime"]))
        await hold_open(ws, peer)

    async with fake_peer(script) as peer:
        holder["realtime"] = realtime = make_realtime(peer.base_url, KEY)
        async with realtime.connect(MODEL, session={"instructions": "x" * 500}) as conn:
            commit_id = await conn.commit()
            error = await conn.recv(timeout=10)
            await eventually(lambda: ledger_at_resend)
    assert commit_id.startswith("evt_") and len(commit_id) > 8
    assert isinstance(error, rte.ErrorEvent) and error.related_event["type"] == "input_audio_buffer.commit"
    assert error.related_event_id == commit_id
    (saved,) = ledger_at_resend[0]
    assert (saved.event_id, saved.related_event_id, saved.model) == (error.event_id, commit_id, MODEL)
    assert (saved.type, saved.code, saved.message) == ("invalid_request_error", "commit_empty",
                                                       "buffer too small")
    assert json.loads(saved.related_event) == {"type": "input_audio_buffer.commit", "event_id": commit_id}


async def test_wait_for_raises_realtime_error_naming_the_related_event() -> None:
    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        update = await receive(ws, peer)
        await send(ws, "error", error={"type": "invalid_request_error", "code": "invalid_value",
                                       "message": "no", "event_id": update["event_id"]})
        await hold_open(ws, peer)

    async with fake_peer(script) as peer:
        realtime = make_realtime(peer.base_url, KEY)
        async with realtime.connect(MODEL) as conn:
            await conn.session_update(voice="echo", instructions="a long prompt " * 100)
            with pytest.raises(rt.RealtimeError) as info:
                await conn.wait_for("session.updated", timeout=10)
    assert info.value.code == "invalid_value" and info.value.related_event["type"] == "session.update"
    assert isinstance(info.value, StreamError)
    (saved,) = saved_realtime_errors(realtime)
    related = json.loads(saved.related_event)  # the prompt is not copied into the ledger
    assert related["session"] == {"voice": "echo", "instructions": "<1400 chars>"}


async def test_unknown_server_events_arrive_kept_raw_between_known_ones() -> None:
    strange = {"type": "vendor.telemetry", "event_id": "event_x", "payload": {"a": [1, 2]}}

    async def script(ws: ServerConnection, n: int, peer: Peer) -> None:
        await send(ws, "session.created", session={})
        await ws.send(json.dumps(strange))
        await ws.send("garbage{")
        await send(ws, "conversation.created", conversation={"id": "conv_1"})
        await hold_open(ws, peer)

    async with fake_peer(script) as peer, make_realtime(peer.base_url, KEY).connect(MODEL) as conn:
        events = [await conn.recv(timeout=10) for _ in range(4)]
    assert isinstance(events[1], rt.UnknownEvent) and events[1].type == "vendor.telemetry"
    assert events[1].raw == strange
    assert isinstance(events[2], rt.UnknownEvent) and events[2].raw == {"message": "garbage{"}
    assert isinstance(events[3], rte.ConversationEvent) and events[3].conversation == {"id": "conv_1"}


# --- the sync twin -------------------------------------------------------------------------------
RENAMED = {"__aenter__": "__enter__", "__aexit__": "__exit__", "__aiter__": "__iter__",
           "__anext__": "__next__"}


def _methods(cls: type) -> dict[str, list[tuple[str, Any, Any, Any]]]:
    """Public methods and the iteration/context dunders, async names mapped to their sync twins."""
    out = {}
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") and name not in RENAMED and name not in RENAMED.values():
            continue
        out[RENAMED.get(name, name)] = [(p.name, p.kind, p.default, p.annotation)
                                         for p in inspect.signature(member).parameters.values()]
    return out


@pytest.mark.parametrize(("async_cls", "sync_cls"), [(rt.AsyncRealtime, rt.Realtime),
                                                     (rt.AsyncRealtimeConnection, rt.RealtimeConnection)])
def test_sync_twins_take_the_same_parameters_as_their_async_originals(async_cls: type,
                                                                     sync_cls: type) -> None:
    assert _methods(async_cls) == _methods(sync_cls)
