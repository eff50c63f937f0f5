"""Realtime over WebRTC: offer/answer with an ephemeral token, a spoken question on the microphone track,
speech back on the remote track and events on the `oai-events` data channel (aiortc on both sides)."""

from __future__ import annotations

import asyncio
import fractions
import json
import time
from typing import Any

import av
import httpx
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gwlab.local.realtime.webrtc import frame_pcm16
from tests.support.realtime import MODEL, TIMEOUT, session_token, silence, speaks, spoken, words

RATE = 48_000
FRAME = RATE // 50


class Microphone(MediaStreamTrack):
    """Silence until told to say something; 20 ms frames at real-time pace, as a real microphone."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.pending = bytearray()
        self.start: float | None = None
        self.pts = 0

    def say(self, pcm48: bytes) -> None:
        self.pending.extend(pcm48)

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self.start is None:
            self.start = time.time()
        await asyncio.sleep(max(0.0, self.start + self.pts / RATE - time.time()))
        chunk = bytes(self.pending[:FRAME * 2])
        del self.pending[:FRAME * 2]
        chunk += b"\0" * (FRAME * 2 - len(chunk))
        samples = np.frombuffer(chunk, "<i2").reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = RATE, self.pts, fractions.Fraction(1, RATE)
        self.pts += FRAME
        return frame


class Peer:
    """The client side: a peer connection, its microphone, the events and the speech it receives."""

    def __init__(self) -> None:
        self.pc = RTCPeerConnection()
        self.mic = Microphone()
        self.pc.addTrack(self.mic)
        self.channel = self.pc.createDataChannel("oai-events")
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.opened = asyncio.Event()
        self.heard = bytearray()  # speech from the server, pcm16 at 48 kHz
        self.seen: list[dict[str, Any]] = []
        self.marks: list[int] = []  # len(heard) when each event arrived
        self.channel.on("message", self._on_message)
        self.channel.on("open", self.opened.set)
        self.pc.on("track", lambda track: asyncio.ensure_future(self._record(track)))

    def _on_message(self, message: str) -> None:
        event = json.loads(message)
        self.seen.append(event)
        self.marks.append(len(self.heard))
        self.events.put_nowait(event)

    async def _record(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                self.heard.extend(frame_pcm16(frame))
        except MediaStreamError:
            pass

    async def connect(self, gateway: Any, token: str) -> httpx.Response:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{gateway.base_url}/realtime?model={MODEL}",
                                       content=self.pc.localDescription.sdp,
                                       headers={"Authorization": f"Bearer {token}",
                                                "Content-Type": "application/sdp"})
        if answer.status_code == 201:
            await self.pc.setRemoteDescription(RTCSessionDescription(answer.text, "answer"))
        return answer

    async def send(self, event: dict[str, Any]) -> None:
        await asyncio.wait_for(self.opened.wait(), TIMEOUT)
        self.channel.send(json.dumps(event))

    async def until(self, kind: str) -> list[dict[str, Any]]:
        events = []
        while True:
            events.append(await asyncio.wait_for(self.events.get(), TIMEOUT))
            if events[-1]["type"] == kind:
                return events


@pytest.mark.slow
async def test_webrtc_spoken_round_trip(gateway) -> None:
    peer = Peer()
    try:
        answer = await peer.connect(gateway, session_token(gateway)["client_secret"]["value"])
        assert answer.status_code == 201 and answer.headers["content-type"].startswith("application/sdp")
        assert answer.text.startswith("v=0")
        first = await peer.until("conversation.created")
        assert [e["type"] for e in first] == ["session.created", "conversation.created"]

        await peer.send({"type": "session.update", "session": {
            "modalities": ["text", "audio"], "input_audio_transcription": {"model": "whisper-1"},
            "temperature": 0, "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}})
        await peer.until("session.updated")
        peer.mic.say(spoken("What is the capital of France?", rate=RATE) + silence(200, RATE))
        events = await peer.until("response.done")
        kinds = [e["type"] for e in events]
        assert kinds[:4] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                             "input_audio_buffer.committed", "conversation.item.created"]
        heard = next(e for e in events if e["type"].endswith("input_audio_transcription.completed"))
        assert "capital" in words(heard["transcript"])
        assert "response.audio.delta" not in kinds  # over WebRTC speech travels on the track
        assert "output_audio_buffer.started" in kinds and "response.audio_transcript.done" in kinds
        done = events[-1]["response"]
        assert done["status"] == "completed"
        transcript = done["output"][0]["content"][0]["transcript"]

        stopped = await peer.until("output_audio_buffer.stopped")
        assert stopped[-1]["response_id"] == done["id"]
        await asyncio.sleep(0.5)  # the last frames in flight
        started = next(i for i, e in enumerate(peer.seen) if e["type"] == "output_audio_buffer.started")
        speech = bytes(peer.heard[peer.marks[started]:])  # from the start of the answer's playback
        assert speaks(transcript, speech, RATE) >= 0.5  # through Opus and back

        await peer.send({"type": "output_audio_buffer.clear"})  # nothing plays now: answered all the same
        assert (await peer.until("output_audio_buffer.cleared"))[-1]["response_id"] is None
    finally:
        await peer.pc.close()


async def test_webrtc_refuses_long_lived_keys(gateway) -> None:
    peer = Peer()
    try:
        answer = await peer.connect(gateway, gateway.api_key)
        assert answer.status_code == 401 and "ephemeral" in answer.json()["error"]["message"]
    finally:
        await peer.pc.close()


async def test_webrtc_token_is_single_use(gateway) -> None:
    token = session_token(gateway)["client_secret"]["value"]
    peers = [Peer(), Peer()]
    try:
        assert (await peers[0].connect(gateway, token)).status_code == 201
        assert (await peers[1].connect(gateway, token)).status_code == 401
    finally:
        for peer in peers:
            await peer.pc.close()


def test_webrtc_needs_an_sdp_body(gateway) -> None:
    token = session_token(gateway)["client_secret"]["value"]
    auth = {"Authorization": f"Bearer {token}"}
    r = httpx.post(f"{gateway.base_url}/realtime?model={MODEL}", json={"sdp": "v=0"}, headers=auth)
    assert r.status_code == 415
    r = httpx.post(f"{gateway.base_url}/realtime?model={MODEL}", content="hello",
                   headers={**auth, "Content-Type": "application/sdp"})
    assert r.status_code == 400
