"""Realtime limits (issue 30, finding 4): the uncommitted input audio buffer is capped, an append past the cap
is an `error` event naming the buffer (what it held is kept, to commit or clear), and a key may hold only so
many sessions at once (a 429 at the handshake). A gateway of the test's own, in this process, with small caps
(`Limits`, docs/security.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from gwlab.local.limits import Limits
from gwlab.local.realtime.session import BUFFER_FULL
from gwlab.local.server import LocalGateway, start
from gwlab.local.settings import Settings
from gwlab.local.store import Store
from tests.support import wait_until_async
from tests.support.realtime import b64, connect, silence

CAP = 48_000  # bytes of pcm16 at 24 kHz: one second


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    settings = Settings(limits=Limits(realtime_buffer_bytes=CAP, realtime_sessions_per_key=1))
    running = start(str(Path(tmp_path_factory.mktemp("rtlimits")) / "gateway.sqlite"), settings=settings)
    try:
        yield running
    finally:
        running.stop()


async def test_an_append_past_the_buffer_cap_is_an_error_event_naming_it(gateway: LocalGateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {"turn_detection": None}})
        await rt.until("session.updated")
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(800)), "event_id": "a1"})
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(800)), "event_id": "a2"})
        error = await rt.recv()
        assert error["type"] == "error", error
        assert error["error"]["code"] == BUFFER_FULL and error["error"]["event_id"] == "a2"
        assert "input_audio_buffer" in error["error"]["message"] and str(CAP) in error["error"]["message"]
        # cleared, the buffer takes audio again: the next event answered is not an error
        await rt.send({"type": "input_audio_buffer.clear"})
        assert (await rt.recv())["type"] == "input_audio_buffer.cleared"
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(800))})
        await rt.send({"type": "session.update", "session": {"instructions": "Be brief."}})
        assert (await rt.recv())["type"] == "session.updated"


async def test_a_key_holds_at_most_its_sessions_and_gets_one_back_when_it_closes(gateway: LocalGateway) -> None:
    store = Store(gateway.db_path)
    try:
        other = store.create_key(f"rt-other-{uuid.uuid4().hex[:6]}")
    finally:
        store.close()
    async with connect(gateway):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with connect(gateway):
                pass
        assert refused.value.response.status_code == 429
        assert b"too_many_sessions" in refused.value.response.body
        async with connect(gateway, key=other):  # the cap is per key
            pass

    # the server gives the slot back as its session handler ends, just after the close handshake
    slots = gateway._server.config.app.state.realtime_slots  # the gateway in this process
    await wait_until_async(lambda: slots.count(_key_id(gateway)) == 0, timeout=30, what="the slot given back")
    async with connect(gateway):
        pass


def _key_id(gateway: LocalGateway) -> int:
    store = Store(gateway.db_path)
    try:
        record = store.find_key(gateway.api_key)
        assert record is not None
        return record.id
    finally:
        store.close()
