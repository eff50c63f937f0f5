"""Realtime over WebRTC (aiortc): the SDP answer, the microphone track in, speech out, events on `oai-events`.

The session logic is the WebSocket's (`ServerSession`); only the carriers differ: events are JSON text
messages on the data channel the client opened, input audio is the remote track (Opus, 48 kHz), and
speech plays on a local track instead of travelling as `response.audio.delta` events (protocols.md §6.7).
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import av
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gwlab.local.errors import APIError
from gwlab.local.realtime.responses import RATE
from gwlab.local.realtime.session import ServerSession
from gwlab.wire.limits import WEBRTC_CONNECTION_TIMEOUT_MS, WEBRTC_DATA_CHANNEL, WEBRTC_SAMPLE_RATE
from gwlab.wire.realtime import audio

log = logging.getLogger("gwlab.local")

FRAME_SAMPLES = WEBRTC_SAMPLE_RATE // 50  # 20 ms, Opus's usual packet


class SpeechTrack(MediaStreamTrack):
    """The model's voice: queued speech in 20 ms frames at real-time pace, silence in between."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue = bytearray()  # pcm16 at 48 kHz
        self._start: float | None = None
        self._pts = 0
        self._drained: Callable[[], None] | None = None

    def play(self, pcm16: bytes) -> None:
        self._queue.extend(audio.resample_pcm16(pcm16, RATE, WEBRTC_SAMPLE_RATE))

    def clear(self) -> None:
        self._queue.clear()
        self._drained = None

    def set_drained(self, callback: Callable[[], None]) -> None:
        self._drained = callback

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.time()
        else:
            await asyncio.sleep(max(0.0, self._start + self._pts / WEBRTC_SAMPLE_RATE - time.time()))
        size = FRAME_SAMPLES * 2
        chunk = bytes(self._queue[:size])
        del self._queue[:size]
        if chunk and not self._queue and self._drained is not None:
            drained, self._drained = self._drained, None
            drained()
        chunk += b"\0" * (size - len(chunk))
        frame = av.AudioFrame.from_ndarray(np.frombuffer(chunk, dtype="<i2").reshape(1, -1), format="s16",
                                           layout="mono")
        frame.sample_rate, frame.pts = WEBRTC_SAMPLE_RATE, self._pts
        frame.time_base = fractions.Fraction(1, WEBRTC_SAMPLE_RATE)
        self._pts += FRAME_SAMPLES
        return frame


def frame_pcm16(frame: av.AudioFrame) -> bytes:
    """A decoded frame as mono pcm16 (channels averaged), whatever layout the decoder chose."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    mono: np.ndarray
    if frame.format.is_planar:
        mono = data.astype(np.float64).mean(axis=0)
    else:
        mono = data.reshape(-1, channels).astype(np.float64).mean(axis=1)
    if frame.format.name.startswith("flt"):
        mono = mono * 32768.0
    return np.clip(np.rint(mono), -32768, 32767).astype("<i2").tobytes()


class _Call:
    """One peer connection and its session; kept referenced by the app until it closes."""

    def __init__(self, app: Any, session_options: dict[str, Any], on_close: Callable[[], None] | None = None) -> None:
        self.app, self.pc, self.speech = app, RTCPeerConnection(), SpeechTrack()
        self.on_close = on_close
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.session = ServerSession(self.outbox.put_nowait, audio_sink=self.speech, **session_options)
        self.channel: Any = None
        self.channel_open = asyncio.Event()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def negotiate(self, offer: str) -> str:
        self.pc.addTrack(self.speech)
        self.pc.on("datachannel", self._on_channel)
        self.pc.on("track", self._on_track)
        self.pc.on("connectionstatechange", self._on_state)
        await self.pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        await self.session.start()  # queued until the client's data channel opens
        self.spawn(self._write())
        self.spawn(self._deadline())
        return self.pc.localDescription.sdp

    def _on_channel(self, channel: Any) -> None:
        if channel.label != WEBRTC_DATA_CHANNEL:
            return
        self.channel = channel
        channel.on("message", lambda message: self.spawn(self.session.handle(message)))
        channel.on("close", lambda: self.spawn(self.close()))
        self.channel_open.set()

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self.spawn(self._listen(track))

    async def _listen(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                if not isinstance(frame, av.AudioFrame):  # an audio track sends audio frames only
                    continue
                self.session.feed_audio(frame_pcm16(frame), frame.sample_rate)

    async def _on_state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            await self.close()

    async def _write(self) -> None:
        """The only sender on the channel, in emission order (events wait for the channel to open)."""
        await self.channel_open.wait()
        while True:
            event = await self.outbox.get()
            if self.channel.readyState != "open":
                return
            self.channel.send(json.dumps(event, separators=(",", ":")))

    async def _deadline(self) -> None:
        """Give up on a peer that never connects (the spec's connection_timeout, 30 s)."""
        await asyncio.sleep(WEBRTC_CONNECTION_TIMEOUT_MS / 1000)
        if self.pc.connectionState != "connected" or not self.channel_open.is_set():
            await self.close()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.app.state.realtime_calls.discard(self)
        if self.on_close is not None:
            self.on_close()
        await self.session.close()
        with contextlib.suppress(Exception):
            await self.pc.close()
        current = asyncio.current_task()
        for task in list(self.tasks):
            if task is not current:
                task.cancel()


async def answer(app: Any, offer: str, *, model: str, config: dict[str, Any] | None,
                 rate_limit: Callable[[], dict[str, str]] | None, max_buffer_bytes: int | None = None,
                 on_close: Callable[[], None] | None = None) -> str:
    """The SDP answer for a client's offer; the call then lives on until either side closes it, and
    `on_close` runs once when it does (not when negotiation fails: the caller handles that)."""
    if not hasattr(app.state, "realtime_calls"):
        app.state.realtime_calls = set()
    call = _Call(app, {"model": model, "config": config, "rate_limit": rate_limit,
                       "max_buffer_bytes": max_buffer_bytes})
    app.state.realtime_calls.add(call)
    try:
        answer = await call.negotiate(offer)
        call.on_close = on_close
        return answer
    except ValueError as exc:  # aiortc's word for an offer it cannot parse or answer
        await call.close()
        raise APIError(400, f"The SDP offer cannot be answered: {exc}", param="body") from None
    except Exception:
        await call.close()
        raise
