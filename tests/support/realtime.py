"""Helpers for the realtime tests: a raw WebSocket client and spoken audio."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import websockets

from gwlab.wire.realtime import audio
from tests.support.models import REALTIME_MODEL

MODEL = REALTIME_MODEL
TIMEOUT = 120  # seconds for any one expected event: the machine may be busy with other tests


def ws_url(gateway: Any, model: str | None = MODEL) -> str:
    return gateway.base_url.replace("http://", "ws://") + "/realtime" + (f"?model={model}" if model else "")


class Realtime:
    """A raw realtime connection: JSON events in, JSON events out, nothing hidden."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.seen: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any] | str) -> None:
        await self.ws.send(event if isinstance(event, str) else json.dumps(event))

    async def recv(self) -> dict[str, Any]:
        event = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
        self.seen.append(event)
        return event

    async def until(self, kind: str) -> list[dict[str, Any]]:
        """Every event up to and including the first of type `kind`."""
        events = []
        while True:
            event = await self.recv()
            events.append(event)
            if event["type"] == kind:
                return events

    async def turn(self, text: str, **response: Any) -> list[dict[str, Any]]:
        """A typed user message and a response; the events up to rate_limits.updated."""
        await self.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
        await self.send({"type": "response.create", **({"response": response} if response else {})})
        return await self.until("rate_limits.updated")


@asynccontextmanager
async def connect(gateway: Any, *, key: str | None = None, model: str | None = MODEL,
                  headers: dict[str, str] | None = None, subprotocols: list[str] | None = None,
                  ) -> AsyncIterator[Realtime]:
    """A session with its session.created and conversation.created already read."""
    if headers is None:
        headers = {"Authorization": f"Bearer {key or gateway.api_key}", "OpenAI-Beta": "realtime=v1"}
    async with websockets.connect(ws_url(gateway, model), additional_headers=headers,
                                  subprotocols=subprotocols, max_size=None) as ws:  # type: ignore[arg-type]
        rt = Realtime(ws)
        assert (await rt.recv())["type"] == "session.created"
        assert (await rt.recv())["type"] == "conversation.created"
        yield rt


def session_token(gateway: Any, **body: Any) -> dict[str, Any]:
    """POST /v1/realtime/sessions as the SDK sends it (with its odd OpenAI-Beta header)."""
    r = httpx.post(f"{gateway.base_url}/realtime/sessions", json={"model": MODEL, **body},
                   headers={"Authorization": f"Bearer {gateway.api_key}", "OpenAI-Beta": "assistants=v2"})
    assert r.status_code == 200, r.text
    return r.json()


def spoken(text: str, voice: str = "alloy", rate: int = 24_000) -> bytes:
    """`text` spoken by espeak-ng, as pcm16 at `rate`."""
    from gwlab.local.engines import get_speaker

    pcm, native = get_speaker().speak(text, voice)
    return audio.resample_pcm16(pcm, native, rate)


def silence(ms: int, rate: int = 24_000) -> bytes:
    return b"\0\0" * (rate * ms // 1000)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.lower()))


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def overlap(said: str, heard: str) -> float:
    """Share of the said words that were heard; numbers are left out, as Whisper writes them either
    as digits or as words ("36,467" or "thirty six thousand ...")."""
    said_words = {w for w in words(said) if w.isalpha()}
    return len(said_words & words(heard)) / max(1, len(said_words))


def speaks(transcript: str, pcm16: bytes, rate: int, voice: str = "alloy", fmt: str = "pcm16") -> float:
    """How well speech matches a transcript: Whisper on the speech against Whisper on espeak-ng reading
    the transcript here, through the same rate and codec. Both sides pass the same text normalisation
    ("83" is spoken and heard as "eighty-three") and the same channel, so what is compared is words."""
    from gwlab.local.engines import get_transcriber

    reference = audio.decode(audio.encode(spoken(transcript, voice, rate), fmt), fmt)
    expected = get_transcriber().transcribe(reference, rate)
    return overlap(expected, get_transcriber().transcribe(pcm16, rate))
