"""RealtimeConsole: talk to a realtime model from a notebook; the kernel holds the connection and the key.

The browser captures the microphone (getUserMedia with echo cancellation, an AudioWorklet) and sends
pcm16 frames to the kernel as binary comm buffers; the kernel appends them to its WebSocket session
and sends the model's audio back as binary buffers for a worklet player. Only comm messages cross,
so it works with a remote kernel, and the long-lived key never leaves the kernel (spec,
Authentication rule 6). Interruption: when the user speaks over playback (server VAD's
speech_started, or the talk button), the browser stops playing and reports how much was heard; the
kernel truncates the assistant item there, so the conversation holds only what was heard.

The optional WebRTC mode is browser-direct: the kernel mints an ephemeral token
(`gw.realtime.session_token`, one minute, one connection), the only credential the browser ever
sees; the browser relays data-channel events so the log and transcript stay the same.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.client.realtime import AsyncRealtimeConnection, parse_event, realtime_url
from gwlab.errors import GatewayError
from gwlab.widgets._bridge import Bridge, Throttle
from gwlab.widgets._esm import esm_of
from gwlab.widgets._realtime_view import ConversationView
from gwlab.wire import limits
from gwlab.wire.models import DEFAULT_MODELS
from gwlab.wire.realtime import audio
from gwlab.wire.realtime import session as wire

__all__ = ["RealtimeConsole"]

DEFAULT_MODEL = DEFAULT_MODELS["realtime"]  # SmolLM2 (gwlab.wire.models says why)
TRUNCATE_WAIT_SECONDS = 1.5  # for the browser's final "heard" report before truncating at the last one
_SESSION_TRAITS = ("mode", "vad_threshold", "vad_prefix_padding_ms", "vad_silence_duration_ms", "voice",
                   "instructions")


def _bounded(kind: type[Any], default: float, bounds: tuple[float, float]) -> Any:
    """A synced trait whose range is the spec's (wire/limits.py), so the browser cannot set a value the
    gateway would refuse."""
    return kind(default, min=bounds[0], max=bounds[1]).tag(sync=True)


class RealtimeConsole(anywidget.AnyWidget):
    """Microphone in, speech out, transcripts, token usage and an event log, in one notebook widget.

    Parameters
    ----------
    gw : Gateway, optional
        From `gwlab.connect()` (default: the one it returned last); its key stays in the kernel.
    model : str
        A realtime model ID.
    mode : {"vad", "ptt"}
        Server voice activity detection, or push-to-talk (hold the button; release commits).
    transport : {"websocket", "webrtc"}
        The kernel's WebSocket (default; works with a remote kernel), or browser-direct WebRTC with
        an ephemeral token from the kernel (the gateway must accept the notebook's origin).
    voice, instructions : str
        Session settings.
    max_output_tokens : int or "inf"
        Cap per response (short spoken answers by default).
    vad_threshold, vad_prefix_padding_ms, vad_silence_duration_ms :
        Server VAD controls, within the spec's ranges (0-1, 0-5000, 100-10000; defaults 0.5/500/1000).

    Examples
    --------
    >>> RealtimeConsole(gw, model="local/realtime-gemma-3-270m")      # doctest: +SKIP
    """

    _esm = esm_of(__file__)

    model = traitlets.Unicode(DEFAULT_MODEL).tag(sync=True)
    mode = traitlets.Enum(("vad", "ptt"), default_value="vad").tag(sync=True)
    transport = traitlets.Enum(("websocket", "webrtc"), default_value="websocket").tag(sync=True)
    voice = traitlets.Enum(limits.VOICES, default_value="alloy").tag(sync=True)
    instructions = traitlets.Unicode("").tag(sync=True)
    vad_threshold = _bounded(traitlets.Float, limits.VAD_THRESHOLD_DEFAULT, limits.VAD_THRESHOLD_RANGE)
    vad_prefix_padding_ms = _bounded(traitlets.Int, limits.VAD_PREFIX_PADDING_MS_DEFAULT,
                                     limits.VAD_PREFIX_PADDING_MS_RANGE)
    vad_silence_duration_ms = _bounded(traitlets.Int, limits.VAD_SILENCE_DURATION_MS_DEFAULT,
                                       limits.VAD_SILENCE_DURATION_MS_RANGE)
    # the sliders' ranges, written once in wire/limits.py and read by the front end from here
    vad_limits = traitlets.Dict({
        "threshold": [*limits.VAD_THRESHOLD_RANGE, 0.05],
        "prefix_padding_ms": [*limits.VAD_PREFIX_PADDING_MS_RANGE, 100],
        "silence_duration_ms": [*limits.VAD_SILENCE_DURATION_MS_RANGE, 100],
    }, read_only=True).tag(sync=True)
    # disconnected | connecting | connected | listening | thinking | speaking | error
    status = traitlets.Unicode("disconnected").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    transcript = traitlets.List(traitlets.Dict()).tag(sync=True)  # {id, role, text, status[, heard_ms]}
    usage = traitlets.Dict().tag(sync=True)  # summed over responses
    events = traitlets.List(traitlets.Dict()).tag(sync=True)  # newest first: {n, dir, type, count, t, json}
    # no key, token or URL trait: browser state is visible to anyone who opens the notebook

    def __init__(self, gw: Gateway | AsyncGateway | None = None, *, model: str = DEFAULT_MODEL, mode: str = "vad",
                 transport: str = "websocket", max_output_tokens: int | str = 64,
                 update_interval: float = 0.1, **settings: Any) -> None:
        super().__init__(model=model, mode=mode, transport=transport, **settings)
        self._bridge = Bridge(gw)
        self._max_output_tokens = max_output_tokens
        self._view = ConversationView()
        # the transcript at up to 1/update_interval per second; the log, a larger trait, at most 4/s
        self._throttle = Throttle(self._publish, update_interval)
        self._log_throttle = Throttle(self._publish_log, max(update_interval, 0.25))
        self._commands: asyncio.Queue[tuple[Any, ...]] | None = None
        self._task: Any = None
        self._conn: AsyncRealtimeConnection | None = None
        self._rtc_open = False
        # playback, as the kernel knows it: item -> ms sent to the browser / ms it reported heard
        self._sent_ms: dict[tuple[str, int], float] = {}
        self._heard_ms: dict[tuple[str, int], float] = {}
        self._audio_done: set[tuple[str, int]] = set()
        self._playing: tuple[str, int] | None = None
        self._interrupted: tuple[str, int] | None = None
        self._truncate_timer: asyncio.TimerHandle | None = None
        self._response_active = False
        self.on_msg(self._on_front_end)

    # -- notebook API -----------------------------------------------------------------------------
    @property
    def session_config(self) -> dict[str, Any]:
        """The session this console asks for (sent again whenever a control changes)."""
        vad = {"type": "server_vad", "threshold": self.vad_threshold,
               "prefix_padding_ms": self.vad_prefix_padding_ms,
               "silence_duration_ms": self.vad_silence_duration_ms}
        config: dict[str, Any] = {
            "modalities": ["text", "audio"], "voice": self.voice, "input_audio_format": "pcm16",
            "output_audio_format": "pcm16", "input_audio_transcription": {"model": "whisper-1"},
            "turn_detection": vad if self.mode == "vad" else None,
            "max_response_output_tokens": self._max_output_tokens}
        if self.instructions:
            config["instructions"] = self.instructions
        return config

    def connect(self) -> None:
        """Open the realtime session (WebSocket: on the gateway's loop; WebRTC: the browser opens it)."""
        if self._task is not None and not self._task.done():
            return
        self.error, self.status = "", "connecting"
        self._commands = asyncio.Queue()
        if self.transport == "websocket":
            self._task = self._bridge.submit(self._run_websocket())
        else:
            self._task = self._bridge.submit(self._run_relay())

    def disconnect(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def say(self, text: str) -> None:
        """A typed user turn (text in, the answer spoken and transcribed); connects first if needed."""
        if self._task is None or self._task.done():
            self.connect()
        self._command("text", text)

    def append_audio(self, pcm16: bytes, rate: int = limits.PCM16_SAMPLE_RATE) -> None:
        """Microphone audio, as the browser sends it (any rate; resampled to the session's)."""
        self._command("audio", bytes(pcm16), rate)

    def talk(self, pressed: bool) -> None:
        """Push-to-talk: pressing interrupts playback and clears the buffer; releasing commits and asks."""
        self._bridge.call(self._on_talk, pressed)

    # -- the front end ------------------------------------------------------------------------------
    def _on_front_end(self, _widget: Any, content: Mapping[str, Any], buffers: Sequence[bytes]) -> None:
        kind = content.get("type")
        if kind == "audio" and buffers:
            self.append_audio(bytes(buffers[0]), int(content.get("rate") or limits.PCM16_SAMPLE_RATE))
        elif kind == "played":
            self._bridge.call(self._on_played, content)
        elif kind == "text":
            self.say(str(content.get("text", "")))
        elif kind == "ptt":
            self.talk(content.get("state") == "down")
        elif kind == "connect":
            self.connect()
        elif kind == "disconnect":
            self.disconnect()
        elif kind == "mic":
            self._bridge.call(self._note_browser, {"type": f"microphone.{content.get('state')}",
                                                    **({"error": content["error"]} if content.get("error") else {})})
        elif kind == "webrtc_token":
            self._bridge.submit(self._mint_token())
        elif kind == "rtc_event" and isinstance(content.get("event"), Mapping):
            self._bridge.call(self._on_rtc_event, dict(content["event"]))
        elif kind == "rtc_state":
            self._bridge.call(self._on_rtc_state, str(content.get("state")), content.get("error"))

    @traitlets.observe(*_SESSION_TRAITS)
    def _on_control(self, _change: Any) -> None:
        if self.status not in ("disconnected", "connecting", "error"):
            self._command("session")

    def _command(self, *command: Any) -> None:
        queue = self._commands  # None once the session ended: a live microphone does not pile up
        if queue is not None:
            self._bridge.call(queue.put_nowait, command)

    # -- the WebSocket session (everything below runs on the gateway's loop) ----------------------
    async def _run_websocket(self) -> None:
        conn = self._bridge.gateway.realtime.connect(self.model, session=self.session_config)
        try:
            await conn.open()
            self._conn = conn
            self._note("client", {"type": wire.SESSION_UPDATE, "session": self.session_config})
            self._set(status="connected")
            sender = asyncio.create_task(self._send_forever())
            try:
                async for event in conn:
                    self._on_server(event.type, event.raw if isinstance(event.raw, Mapping) else {})
            finally:
                sender.cancel()
        except GatewayError as exc:
            self._set(status="error", error=str(exc))
        finally:
            self._conn, self._commands = None, None
            with contextlib.suppress(Exception):
                await conn.close()
            if self.status != "error":
                self._set(status="disconnected")

    async def _send_forever(self) -> None:
        """Client events leave in the order they were asked for, one at a time."""
        assert self._commands is not None
        while True:
            command = await self._commands.get()
            try:
                await self._perform(*command)
            except GatewayError as exc:  # refused locally (a bad value) or the socket is gone
                self._set(error=str(exc))

    async def _perform(self, kind: str, *args: Any) -> None:
        if kind == "audio":
            if self._conn is not None:
                await self._conn.append_audio(args[0], rate=args[1])
                self._note("client", {"type": wire.INPUT_AUDIO_BUFFER_APPEND, "audio": f"<{len(args[0])} bytes>"})
            return
        if kind == "text":
            await self._send_event({"type": wire.CONVERSATION_ITEM_CREATE, "item": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": args[0]}]}})
            await self._send_event({"type": wire.RESPONSE_CREATE})
        elif kind == "session":
            if self._conn is not None:  # through the client, so a reconnect re-sends the new config
                await self._conn.session_update(**self.session_config)
                self._note("client", {"type": wire.SESSION_UPDATE, "session": self.session_config})
            else:
                await self._send_event({"type": wire.SESSION_UPDATE, "session": self.session_config})
        elif kind == "commit":
            if self._conn is not None:
                await self._conn.commit()
                self._note("client", {"type": wire.INPUT_AUDIO_BUFFER_COMMIT})
            await self._send_event({"type": wire.RESPONSE_CREATE})
        else:  # a ready client event: truncate, cancel, clear
            await self._send_event(args[0])

    async def _send_event(self, event: dict[str, Any]) -> None:
        """One client event, over the WebSocket or relayed to the browser's data channel."""
        if self._conn is not None:
            await self._conn.send(event)
        elif self.transport == "webrtc" and self._rtc_open:
            message = dict(event)
            wire.check_client_event(message)  # strict writer, as the WebSocket client is
            self._bridge.post(self.send, {"type": "rtc_send", "event": message})
        else:
            return
        self._note("client", event)

    # -- server events ----------------------------------------------------------------------------
    def _on_server(self, kind: str, raw: Mapping[str, Any]) -> None:
        self._view.server(raw if raw else {"type": kind})
        if kind == wire.RESPONSE_AUDIO_DELTA:
            self._forward_audio(raw)
        elif kind == wire.RESPONSE_AUDIO_DONE:
            self._audio_done.add(_key(raw))
            self._check_played(_key(raw))
        elif kind == wire.INPUT_AUDIO_BUFFER_SPEECH_STARTED:
            self._status("listening")
            self._interrupt(cancel=False)  # server VAD has already cancelled a running response
        elif kind in (wire.INPUT_AUDIO_BUFFER_SPEECH_STOPPED, wire.RESPONSE_CREATED):
            if kind == wire.RESPONSE_CREATED:
                self._response_active = True
            self._status("thinking")
        elif kind == wire.RESPONSE_DONE:
            self._response_active = False
            if self._playing is None:
                self._status("connected")
        elif kind == wire.ERROR:
            self._set(error=self._view.error)
        self._throttle.poke()
        self._log_throttle.poke()

    def _forward_audio(self, raw: Mapping[str, Any]) -> None:
        """Model speech to the browser as a binary buffer (an event to play, not state to keep)."""
        key = _key(raw)
        if key == self._interrupted:
            return  # the user spoke over it: late chunks are not played
        delta = raw.get("delta")
        pcm = base64.b64decode(delta) if isinstance(delta, str) else b""  # pcm16: the session asks for it
        self._sent_ms[key] = self._sent_ms.get(key, 0.0) + audio.duration_ms(pcm)
        self._playing = key
        self._status("speaking")
        self._bridge.post(self.send, {"type": "audio", "item_id": key[0], "content_index": key[1],
                                      "rate": limits.PCM16_SAMPLE_RATE}, [pcm])

    # -- playback and interruption ----------------------------------------------------------------
    def _on_played(self, report: Mapping[str, Any]) -> None:
        """The browser's player: {item_id, content_index, ms, state: start|progress|drained|stopped}."""
        key = (str(report.get("item_id")), int(report.get("content_index") or 0))
        ms, state = float(report.get("ms") or 0.0), str(report.get("state"))
        self._heard_ms[key] = max(self._heard_ms.get(key, 0.0), ms)
        self._note_browser({"type": f"playback.{state}", "item_id": key[0], "ms": round(ms)})
        if state == "stopped" and key == self._interrupted:
            self._truncate(key, ms)
        elif state == "drained":
            self._check_played(key)

    def _check_played(self, key: tuple[str, int]) -> None:
        """Playback is over once the server's audio is done and the browser heard (about) all of it."""
        if key == self._playing and key in self._audio_done and \
                self._heard_ms.get(key, 0.0) >= self._sent_ms.get(key, 0.0) - 50:
            self._playing = None
            if not self._response_active:
                self._status("connected")

    def _interrupt(self, *, cancel: bool) -> None:
        """The user speaks over the model: stop playback, then truncate at what was heard."""
        key = self._playing
        if key is None:
            return
        self._playing, self._interrupted = None, key
        if cancel and self._response_active:
            self._command("event", {"type": wire.RESPONSE_CANCEL})
        self._note_browser({"type": "playback.interrupt", "item_id": key[0]})
        self._bridge.post(self.send, {"type": "interrupt", "item_id": key[0], "content_index": key[1]})
        loop = asyncio.get_running_loop()
        self._truncate_timer = loop.call_later(TRUNCATE_WAIT_SECONDS, lambda: self._truncate(key, None))

    def _truncate(self, key: tuple[str, int], heard_ms: float | None) -> None:
        """conversation.item.truncate at the heard offset (never beyond what was sent)."""
        if self._interrupted != key:
            return
        self._interrupted = None
        if self._truncate_timer is not None:
            self._truncate_timer.cancel()
            self._truncate_timer = None
        heard = self._heard_ms.get(key, 0.0) if heard_ms is None else heard_ms
        end = int(min(heard, self._sent_ms.get(key, 0.0)))
        self._command("event", {"type": wire.CONVERSATION_ITEM_TRUNCATE, "item_id": key[0],
                                "content_index": key[1], "audio_end_ms": end})

    def _on_talk(self, pressed: bool) -> None:
        if pressed:
            self._interrupt(cancel=True)
            self._command("event", {"type": wire.INPUT_AUDIO_BUFFER_CLEAR})
            self._status("listening")
        else:
            self._command("commit")
            self._status("thinking")

    # -- WebRTC: the browser holds the peer connection; the kernel mints the token and keeps the view --
    async def _mint_token(self) -> None:
        try:
            token = await self._bridge.gateway.realtime.session_token(self.model, **self.session_config)
        except GatewayError as exc:
            self._set(status="error", error=str(exc))
            self._bridge.post(self.send, {"type": "webrtc_token", "error": str(exc)})
            return
        self._note_browser({"type": "webrtc.token", "expires_at": token.expires_at})
        # the ephemeral token, never the key: a custom message (not a trait, so never saved in the notebook)
        self._bridge.post(self.send, {"type": "webrtc_token", "token": token.value, "expires_at": token.expires_at,
                                      "url": realtime_url(self._bridge.gateway.base_url, self.model, websocket=False)})

    async def _run_relay(self) -> None:
        """WebRTC mode: client events go to the browser's data channel until disconnected."""
        try:
            await self._send_forever()
        finally:
            self._rtc_open, self._commands = False, None
            self._set(status="disconnected")

    def _on_rtc_event(self, event: dict[str, Any]) -> None:
        parsed = parse_event(json.dumps(event))  # typed as the WebSocket client types it
        self._on_server(parsed.type, parsed.raw if isinstance(parsed.raw, Mapping) else event)

    def _on_rtc_state(self, state: str, error: Any) -> None:
        self._rtc_open = state == "open"
        self._note_browser({"type": f"webrtc.{state}", **({"error": error} if error else {})})
        if state == "open":
            self._set(status="connected")
        elif state in ("failed", "closed"):
            self._set(status="error" if error else "disconnected", error=str(error or ""))

    # -- publishing -------------------------------------------------------------------------------
    def _note(self, direction: str, event: Mapping[str, Any]) -> None:
        self._view.note(direction, event)
        self._log_throttle.poke()

    def _note_browser(self, event: Mapping[str, Any]) -> None:
        self._note("browser", event)

    def _status(self, status: str) -> None:
        self._set(status=status)

    def _set(self, **values: Any) -> None:
        self._bridge.post(self._apply, values)

    def _publish(self) -> None:
        view = self._view
        self._bridge.post(self._apply, {"transcript": [dict(e) for e in view.transcript], "usage": dict(view.usage)})

    def _publish_log(self) -> None:
        self._bridge.post(self._apply, {"events": [dict(e) for e in self._view.log]})

    def _apply(self, values: Mapping[str, Any]) -> None:
        with self.hold_sync():
            for name, value in values.items():
                setattr(self, name, value)


def _key(raw: Mapping[str, Any]) -> tuple[str, int]:
    return str(raw.get("item_id")), int(raw.get("content_index") or 0)
