"""Realtime over WebRTC (spec: POST /realtime?model=; protocols.md §6.7), with aiortc.

Why a separate module: aiortc and PyAV are the optional `rtc` extra; importing gwlab must not need
them. The flow is the browser's: an ephemeral token (never the long-lived key, which this module
refuses to send), a peer connection with one outgoing audio track fed from pcm16 and the
`oai-events` data channel, the offer SDP POSTed as application/sdp, the answer set as the remote
description. Events on the data channel go through the same RealtimeSession as the WebSocket
client (stamping, error ledger, turns); audio travels as Opus on the tracks, at 48 kHz.
There is no reconnect: an ephemeral token is good for one connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame
from numpy.typing import NDArray

from gwlab.client.ledger import CallRecord, Ledger
from gwlab.client.realtime import AsyncRealtime, EphemeralToken, realtime_url
from gwlab.client.realtime.session import RealtimeSession, _End
from gwlab.client.transport.status import request_id_of, status_error
from gwlab.errors import ConnectionFailed, InvalidRequest, Timeout
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import (
    AUTHORIZATION_HEADER,
    PCM16_SAMPLE_RATE,
    WEBRTC_CONNECTION_TIMEOUT_MS,
    WEBRTC_DATA_CHANNEL,
    WEBRTC_SAMPLE_RATE,
)
from gwlab.wire.realtime import audio
from gwlab.wire.realtime import session as wire

__all__ = ["AsyncWebRTCConnection", "PcmAudioTrack", "connect_webrtc"]
REALTIME = FAMILIES["realtime"]

RTC_RATE = WEBRTC_SAMPLE_RATE  # Opus runs at 48 kHz; the track is fed at this rate
FRAME_MS = 20
_FRAME_SAMPLES = RTC_RATE * FRAME_MS // 1000
_RECEIVED_FRAMES_KEPT = 1500  # 30 s of 20 ms frames; older ones are dropped when nobody reads


class PcmAudioTrack(MediaStreamTrack):
    """The outgoing "microphone": pcm16 pushed by the caller, sent as 20 ms frames at 48 kHz.

    Silence fills the gaps, paced in real time, as a live microphone would; `push` resamples
    through one streaming resampler per input rate, so consecutive pushes join without clicks.
    """

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._pending = bytearray()
        self._resampler: audio.Resampler | None = None
        self._start: float | None = None
        self._timestamp = 0

    def push(self, pcm16: bytes, rate: int = PCM16_SAMPLE_RATE) -> None:
        """Queue mono pcm16 at `rate` to be sent."""
        if rate != RTC_RATE:
            if self._resampler is None or self._resampler.from_rate != rate:
                self._resampler = audio.Resampler(rate, RTC_RATE)
            pcm16 = audio.float_to_pcm16(self._resampler.process(audio.pcm16_to_float(pcm16)))
        self._pending += pcm16

    def flush(self) -> None:
        """Send the resampler's held-back tail (call after the last push of an utterance)."""
        if self._resampler is not None:
            self._pending += audio.float_to_pcm16(self._resampler.flush())
            self._resampler = None

    @property
    def pending_ms(self) -> float:
        """Audio queued and not yet sent."""
        return audio.duration_ms(bytes(self._pending), RTC_RATE)

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            self._timestamp += _FRAME_SAMPLES
            await asyncio.sleep(self._start + self._timestamp / RTC_RATE - time.monotonic())
        size = _FRAME_SAMPLES * 2
        chunk, self._pending = bytes(self._pending[:size]), self._pending[size:]
        frame = AudioFrame(format="s16", layout="mono", samples=_FRAME_SAMPLES)
        frame.planes[0].update(chunk.ljust(size, b"\x00"))
        frame.pts, frame.sample_rate = self._timestamp, RTC_RATE
        frame.time_base = fractions.Fraction(1, RTC_RATE)
        return frame


def _mono_float(frame: AudioFrame) -> np.ndarray:
    """Any PyAV audio frame (s16/flt, packed or planar, any channels) as mono float samples."""
    data: NDArray[Any] = frame.to_ndarray()
    channels = len(frame.layout.channels)
    samples: np.ndarray
    if frame.format.is_planar:
        samples = data.reshape(channels, -1).mean(axis=0)
    else:
        samples = data.reshape(-1, channels).mean(axis=1)
    if np.issubdtype(data.dtype, np.integer):
        return samples / float(np.iinfo(data.dtype).max + 1)
    return samples


class AsyncWebRTCConnection(RealtimeSession):
    """A realtime session over WebRTC: events on `oai-events`, audio on tracks.

    `send_audio(pcm16, rate=...)` speaks into the outgoing track; `audio_frames()` yields the
    model's audio as pcm16 at 24 kHz. Events, `turn()`, `wait_for()` and the client-event helpers
    are the WebSocket connection's (turn audio stays empty: audio arrives on the track here).
    """

    def __init__(self, *, pc: RTCPeerConnection, channel: RTCDataChannel, track: PcmAudioTrack, model: str,
                 session: Mapping[str, Any] | None, ledger: Ledger | None = None) -> None:
        super().__init__(model=model, session=session, ledger=ledger)
        self._pc, self._channel, self.track = pc, channel, track
        self._opened = asyncio.Event()
        self._frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pumps: list[asyncio.Task[None]] = []
        self._closing = False
        channel.on("open", self._opened.set)
        channel.on("message", self._deliver)
        channel.on("close", self._lost)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)

    def __repr__(self) -> str:
        return f"<AsyncWebRTCConnection {self.model!r} {self._pc.connectionState}>"

    async def __aenter__(self) -> AsyncWebRTCConnection:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the peer connection; events already queued can still be read."""
        self._closing = True
        self.track.stop()
        for pump in self._pumps:
            pump.cancel()
        await self._pc.close()
        self._finish(_End(None))
        self._frames.put_nowait(None)

    def send_audio(self, pcm16: bytes, *, rate: int = PCM16_SAMPLE_RATE, final: bool = True) -> None:
        """Speak mono pcm16 into the outgoing track; `final` also sends the resampler's tail."""
        self.track.push(pcm16, rate)
        if final:
            self.track.flush()

    async def audio_frames(self) -> AsyncIterator[bytes]:
        """The model's audio as it arrives: pcm16, 24 kHz, mono, about 20 ms per item."""
        while (chunk := await self._frames.get()) is not None:
            yield chunk
        self._frames.put_nowait(None)

    async def _transmit(self, message: Mapping[str, Any]) -> None:
        if self._end is not None:
            raise self._end.error or ConnectionFailed("realtime WebRTC session is closed")
        await self._opened.wait()
        if self._channel.readyState != "open":
            raise ConnectionFailed(f"the {WEBRTC_DATA_CHANNEL} data channel is {self._channel.readyState}")
        self._channel.send(json.dumps(message))

    async def _ready(self, timeout: float) -> None:
        """Wait for the data channel, then send the session configuration."""
        try:
            async with asyncio.timeout(timeout):
                await self._opened.wait()
        except TimeoutError:
            state = self._pc.iceConnectionState
            raise Timeout(f"the {WEBRTC_DATA_CHANNEL} data channel did not open within {timeout:g} s "
                          f"(ICE state {state})", method="POST", path=REALTIME.path) from None
        if self._session:
            await self.send({"type": wire.SESSION_UPDATE, "session": self._session})

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self._pumps.append(asyncio.ensure_future(self._pump(track)))

    async def _pump(self, track: MediaStreamTrack) -> None:
        resampler = audio.Resampler(RTC_RATE, PCM16_SAMPLE_RATE)
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                if not isinstance(frame, AudioFrame):  # an audio track sends audio frames only
                    continue
                samples = _mono_float(frame)
                if frame.sample_rate != resampler.from_rate:
                    resampler = audio.Resampler(frame.sample_rate, PCM16_SAMPLE_RATE)
                chunk = audio.float_to_pcm16(resampler.process(samples))
                if self._frames.qsize() >= _RECEIVED_FRAMES_KEPT:
                    self._frames.get_nowait()  # nobody is listening: keep the most recent audio
                self._frames.put_nowait(chunk)

    def _lost(self) -> None:
        if not self._closing:
            self._finish(_End(ConnectionFailed(f"the {WEBRTC_DATA_CHANNEL} data channel closed")))
            self._frames.put_nowait(None)

    async def _on_state(self) -> None:
        if self._pc.connectionState == "failed":
            self._lost()


class _Connecting:
    """`await connect_webrtc(...)` or `async with connect_webrtc(...) as rtc:` (closed on exit)."""

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, AsyncWebRTCConnection]]) -> None:
        self._factory = factory
        self._connection: AsyncWebRTCConnection | None = None

    def __await__(self) -> Generator[Any, None, AsyncWebRTCConnection]:
        return self._factory().__await__()

    async def __aenter__(self) -> AsyncWebRTCConnection:
        self._connection = await self._factory()
        return self._connection

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._connection is not None:
            await self._connection.close()


def connect_webrtc(gateway: Any, model: str, token: EphemeralToken | str | None = None, *,
                   session: Mapping[str, Any] | None = None, ice_servers: Sequence[str] = (),
                   timeout: float = WEBRTC_CONNECTION_TIMEOUT_MS / 1000) -> _Connecting:
    """Open a realtime session over WebRTC, authenticated by an ephemeral token only.

    Parameters
    ----------
    gateway : AsyncGateway (or its `realtime`)
        Used to mint the ephemeral token when `token` is None, and for the base URL.
    model : str
        A realtime model ID.
    token : EphemeralToken or str, optional
        An ephemeral token from `gw.realtime.session_token(...)`. The long-lived key is refused.
    session : mapping, optional
        Session configuration sent on the data channel once it opens.
    ice_servers : sequence of str
        STUN/TURN URLs; none by default (loopback and LAN need none, and the sandbox has no internet).
    timeout : float
        Seconds for the answer and the data channel to open (spec default: 30).

    Examples
    --------
    >>> async with connect_webrtc(gw, "gpt-realtime") as rtc:  # doctest: +SKIP
    ...     rtc.send_audio(pcm16, rate=22050)
    ...     turn = await rtc.turn()
    """
    realtime: AsyncRealtime = getattr(gateway, "realtime", gateway)
    return _Connecting(lambda: _open(realtime, model, token, session, ice_servers, timeout))


async def _open(realtime: AsyncRealtime, model: str, token: EphemeralToken | str | None,
                session: Mapping[str, Any] | None, ice_servers: Sequence[str],
                timeout: float) -> AsyncWebRTCConnection:
    value = await _ephemeral_value(realtime, model, token)
    config = RTCConfiguration(iceServers=[RTCIceServer(urls=url) for url in ice_servers])
    pc = RTCPeerConnection(config)
    call = CallRecord("POST", REALTIME.path, REALTIME.name, model, streamed=True)  # the session's ledger row
    try:
        track = PcmAudioTrack()
        pc.addTrack(track)
        channel = pc.createDataChannel(WEBRTC_DATA_CHANNEL)
        connection = AsyncWebRTCConnection(pc=pc, channel=channel, track=track, model=model, session=session,
                                           ledger=realtime.ledger)
        await pc.setLocalDescription(await pc.createOffer())  # aiortc gathers candidates here
        answer = await _post_offer(realtime_url(realtime.base_url, model, websocket=False),
                                   pc.localDescription.sdp, value, timeout, call)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        connection._call = call  # recorded when the session ends
        await connection._ready(timeout)
    except BaseException as exc:
        await pc.close()
        call.record(realtime.ledger, complete=False, error=exc)
        raise
    return connection


async def _ephemeral_value(realtime: AsyncRealtime, model: str, token: EphemeralToken | str | None) -> str:
    """The token to send: minted when absent; the long-lived key and expired tokens are refused."""
    if token is None:
        token = await realtime.session_token(model)
    if isinstance(token, EphemeralToken) and token.is_expired:
        raise InvalidRequest("token", "the ephemeral token has expired (they last one minute); mint a new "
                                      "one with gw.realtime.session_token(...)")
    value = token.value if isinstance(token, EphemeralToken) else token
    if not isinstance(value, str) or not value:
        raise InvalidRequest("token", "must be an ephemeral token from gw.realtime.session_token(...)")
    if realtime.is_api_key(value):
        raise InvalidRequest("token", "this is the long-lived API key; WebRTC sends only an ephemeral token "
                                      "(gw.realtime.session_token(...)), never the key")
    return value


async def _post_offer(url: str, offer: str, token: str, timeout: float, call: CallRecord) -> str:
    """POST the offer SDP with the ephemeral token (only), return the answer SDP.

    Plain httpx rather than the transport: the transport adds the long-lived key to every request.
    """
    headers = {AUTHORIZATION_HEADER: f"Bearer {token}", "content-type": "application/sdp"}
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url, content=offer.encode(), headers=headers)
    except httpx.TimeoutException as exc:
        raise Timeout(f"no SDP answer within {timeout:g} s", method="POST", path=REALTIME.path) from exc
    except httpx.HTTPError as exc:
        raise ConnectionFailed(f"SDP offer not delivered: {exc}", method="POST", path=REALTIME.path) from exc
    call.status, call.request_id = response.status_code, request_id_of(response.headers)
    if response.status_code >= 400:
        raise status_error(response.status_code, response.headers, response.content, method="POST",
                           path=REALTIME.path, family=REALTIME.name, reason="WebRTC negotiation refused")
    return response.text

