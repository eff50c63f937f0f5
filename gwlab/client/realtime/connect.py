"""`gw.realtime`: realtime sessions over WebSocket and ephemeral tokens (spec: Realtime; protocols.md §6).

The parts live in their own modules and are all importable from here, where users import them:
typed server events and `parse_event` in gwlab/wire/realtime/events.py (pure), what every channel
shares (client events, turns) in realtime/session.py, the socket and its reconnects in
realtime/socket.py, `RealtimeError` in gwlab/errors.py. The sync `Realtime` runs the same code on the
gateway's private loop thread.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import quote

from gwlab.client.ledger import Ledger
from gwlab.client.loop import LoopThread
from gwlab.client.realtime.session import FunctionCall, RealtimeSession, Turn, _checked_session
from gwlab.client.realtime.socket import AsyncRealtimeConnection
from gwlab.client.transport.core import AsyncTransport, normalize_base_url, ws_url
from gwlab.errors import ProtocolError, RealtimeError
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import AUTHORIZATION_HEADER, OPENAI_BETA_HEADER, REALTIME_BETA
from gwlab.wire.models import check_model_id
from gwlab.wire.realtime.events import RateLimit, RealtimeEvent, ServerEvent, UnknownEvent, parse_event

__all__ = [
    "AsyncRealtime",
    "AsyncRealtimeConnection",
    "EphemeralToken",
    "FunctionCall",
    "RateLimit",
    "Realtime",
    "RealtimeConnection",
    "RealtimeError",
    "RealtimeEvent",
    "RealtimeSession",
    "ServerEvent",
    "Turn",
    "UnknownEvent",
    "parse_event",
    "realtime_url",
]
REALTIME = FAMILIES["realtime"]
SESSIONS_PATH = REALTIME.path + "/sessions"  # POST: an ephemeral token


# --- addressing --------------------------------------------------------------------------------
def realtime_url(base_url: str, model: str, *, websocket: bool = True) -> str:
    """`{ws_base_url}/realtime?model=<m>`, or `{base_url}/realtime?model=<m>` for WebRTC.

    ws for http, wss for https; /v1 added only when the base URL lacks it, never twice.
    """
    base = normalize_base_url(base_url)
    return f"{ws_url(base) if websocket else base}{REALTIME.path}?model={quote(check_model_id(model), safe='')}"


@dataclass(frozen=True, slots=True)
class EphemeralToken:
    """A one-minute, single-connection realtime credential; the value never appears in a repr."""

    value: str = field(repr=False)
    expires_at: int | None = None
    model: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and time.time() >= self.expires_at

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EphemeralToken:
        secret = data.get("client_secret")
        if not isinstance(secret, Mapping) or not isinstance(secret.get("value"), str):
            raise ProtocolError("the answer holds no client_secret.value", method="POST",
                                path=SESSIONS_PATH)
        return cls(value=secret["value"], expires_at=secret.get("expires_at"), model=data.get("model"),
                   raw=data)


# --- the family ----------------------------------------------------------------------------------
class AsyncRealtime:
    """`gw.realtime`: WebSocket sessions and ephemeral tokens."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    @property
    def ledger(self) -> Ledger:
        """Where sessions and their error events are recorded (the transport's ledger)."""
        return self._transport.ledger

    def is_api_key(self, value: str) -> bool:
        """Whether `value` is the long-lived key (WebRTC refuses to send it); constant-time."""
        bearer = self._transport.auth_headers("realtime").get(AUTHORIZATION_HEADER, "")
        return secrets.compare_digest(f"Bearer {value}".encode(), bearer.encode())

    def connect(self, model: str, *, session: Mapping[str, Any] | None = None,
                ephemeral_token: EphemeralToken | str | None = None,
                max_reconnects: int = 2) -> AsyncRealtimeConnection:
        """A realtime connection (not yet open): `async with gw.realtime.connect(model=...) as rt:`.

        Authenticates with the gateway key, or with `ephemeral_token` when given (a single-use
        token cannot reconnect: the second handshake fails authentication and is not retried).
        """
        token = ephemeral_token.value if isinstance(ephemeral_token, EphemeralToken) else ephemeral_token
        auth = {AUTHORIZATION_HEADER: f"Bearer {token}"} if token else self._transport.auth_headers("realtime")
        return AsyncRealtimeConnection(url=realtime_url(self.base_url, model),
                                       headers={**auth, OPENAI_BETA_HEADER: REALTIME_BETA}, model=model,
                                       session=session, max_reconnects=max_reconnects, ledger=self.ledger,
                                       via_proxy=self._transport.http_transport.proxy is not None)

    async def session_token(self, model: str, *, voice: str | None = None, **config: Any) -> EphemeralToken:
        """POST /realtime/sessions: an ephemeral token for one connection within a minute."""
        if voice is not None:
            config["voice"] = voice
        body: dict[str, Any] = {"model": check_model_id(model), **_checked_session({}, config, prefix="")}
        return await self._transport.request("POST", SESSIONS_PATH, family=REALTIME.name, json=body,
                                             parse=lambda data, _request_id: EphemeralToken.from_wire(data))


class RealtimeConnection:
    """The sync twin of AsyncRealtimeConnection: each method runs its twin on the loop thread."""

    def __init__(self, twin: AsyncRealtimeConnection, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def __repr__(self) -> str:
        return repr(self._twin).replace("AsyncRealtimeConnection", "RealtimeConnection")

    def __enter__(self) -> RealtimeConnection:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[ServerEvent]:
        return self

    def __next__(self) -> ServerEvent:
        try:
            return self._loop.run(self._twin.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    @property
    def session(self) -> Mapping[str, Any]:
        return self._twin.session

    @property
    def reconnects(self) -> int:
        return self._twin.reconnects

    def open(self) -> None:
        return self._loop.run(self._twin.open())

    def close(self) -> None:
        return self._loop.run(self._twin.close())

    def send(self, event: Mapping[str, Any]) -> str:
        return self._loop.run(self._twin.send(event))

    def session_update(self, **config: Any) -> str:
        return self._loop.run(self._twin.session_update(**config))

    def append_audio(self, pcm16: bytes, *, rate: int | None = None) -> str:
        return self._loop.run(self._twin.append_audio(pcm16, rate=rate))

    def commit(self) -> str:
        return self._loop.run(self._twin.commit())

    def clear(self) -> str:
        return self._loop.run(self._twin.clear())

    def create_item(self, item: Mapping[str, Any], *, previous_item_id: str | None = None) -> str:
        return self._loop.run(self._twin.create_item(item, previous_item_id=previous_item_id))

    def send_text(self, text: str, *, role: str = "user") -> str:
        return self._loop.run(self._twin.send_text(text, role=role))

    def send_function_output(self, call_id: str, output: Any) -> str:
        return self._loop.run(self._twin.send_function_output(call_id, output))

    def delete_item(self, item_id: str) -> str:
        return self._loop.run(self._twin.delete_item(item_id))

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> str:
        return self._loop.run(self._twin.truncate(item_id, content_index, audio_end_ms))

    def create_response(self, **options: Any) -> str:
        return self._loop.run(self._twin.create_response(**options))

    def cancel_response(self, response_id: str | None = None) -> str:
        return self._loop.run(self._twin.cancel_response(response_id))

    def recv(self, *, timeout: float | None = None) -> ServerEvent | None:
        return self._loop.run(self._twin.recv(timeout=timeout))

    def wait_for(self, *types: str, timeout: float | None = None) -> ServerEvent:
        return self._loop.run(self._twin.wait_for(*types, timeout=timeout))

    def turn(self, *, timeout: float | None = None) -> Turn:
        return self._loop.run(self._twin.turn(timeout=timeout))

    def ask(self, text: str, **response_options: Any) -> Turn:
        return self._loop.run(self._twin.ask(text, **response_options))


class Realtime:
    """The sync twin of AsyncRealtime (`gw.realtime` on `Gateway`), usable from a notebook."""

    def __init__(self, twin: AsyncRealtime, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def connect(self, model: str, *, session: Mapping[str, Any] | None = None,
                ephemeral_token: EphemeralToken | str | None = None,
                max_reconnects: int = 2) -> RealtimeConnection:
        return RealtimeConnection(self._twin.connect(model, session=session, ephemeral_token=ephemeral_token,
                                                     max_reconnects=max_reconnects), self._loop)

    def session_token(self, model: str, *, voice: str | None = None, **config: Any) -> EphemeralToken:
        return self._loop.run(self._twin.session_token(model, voice=voice, **config))

    def is_api_key(self, value: str) -> bool:
        return self._twin.is_api_key(value)
