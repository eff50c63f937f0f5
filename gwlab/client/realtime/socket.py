"""Realtime over WebSocket: the socket, its handshake and limited reconnects (spec: Realtime;
protocols.md §6).

A reader task owns the socket, so every server event is parsed, and every `error` event is saved to
the ledger with the client event it names, the moment it arrives, before anything is (re)sent. Events
then wait in a queue for the caller's iteration.

Reconnects happen only for the spec's Connection category (a dropped socket, a refused or timed-out
handshake, a 5xx at the upgrade), at most `max_reconnects` times; authentication and session failures
are reported, never retried. A new socket is a new session: the session configuration is sent again
before any queued send, but the conversation does not survive, so a turn cut by a reconnect is
reported interrupted. A refused upgrade becomes an error by the transport's one `status_error`, and the
wait before each reconnect is the transport's one backoff (`RetryPolicy.backoff`); which failures are
retried stays the spec's realtime rule (the Connection category), stricter than HTTP's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from gwlab.client.ledger import CallRecord, Ledger
from gwlab.client.realtime.session import RealtimeSession, _End, _Reconnected
from gwlab.client.transport.retry import RetryPolicy
from gwlab.client.transport.status import request_id_of, status_error
from gwlab.errors import ConnectionFailed, GatewayError
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import API_KEY_HEADER, AUTHORIZATION_HEADER
from gwlab.wire.realtime import session as wire

__all__ = ["AsyncRealtimeConnection"]
REALTIME = FAMILIES["realtime"]

_MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a server event (websockets' default of 1 MiB is tight for audio)
_RECONNECT_CLOSE_CODES = frozenset({1006, 1011, 1012, 1013, 1014})  # abnormal, server error, restart, later
_RETRYABLE_HANDSHAKE_STATUSES = frozenset({500, 502, 503, 504})
_CREDENTIAL_HEADERS = frozenset({AUTHORIZATION_HEADER, API_KEY_HEADER, "proxy-authorization", "cookie"})


class _CredentialsRedacted(logging.LoggerAdapter[logging.Logger]):
    """websockets logs every handshake header at DEBUG ("> %s: %s"), Authorization included: the
    credential's value is replaced before any handler sees the record."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if len(args) == 2 and isinstance(args[0], str) and args[0].lower() in _CREDENTIAL_HEADERS:
            args = (args[0], "[redacted]")
        super().log(level, msg, *args, **kwargs)


_WS_LOGGER = _CredentialsRedacted(logging.getLogger("websockets.client"), {})


class AsyncRealtimeConnection(RealtimeSession):
    """One realtime session over a WebSocket: send typed client events, read typed server events.

    Use as `async with gw.realtime.connect(model=...) as rt:`; iterate `async for event in rt`.
    """

    def __init__(self, *, url: str, headers: Mapping[str, str], model: str, session: Mapping[str, Any] | None,
                 max_reconnects: int, ledger: Ledger | None = None, open_timeout: float = 10.0,
                 via_proxy: bool = False) -> None:
        super().__init__(model=model, session=session, ledger=ledger)
        self.url = url
        # the socket goes where the gateway's HTTP goes (client/transport/choice.py): through the
        # environment's proxy when one applies, else direct; websockets alone would read HTTP_PROXY even
        # for the embedded gateway that connect() reaches directly
        self._proxy: Literal[True] | None = True if via_proxy else None
        self._headers = dict(headers)  # holds the credential: never shown, never logged
        self._open_timeout = open_timeout
        self.max_reconnects = max_reconnects
        self.reconnects = 0
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed: asyncio.Condition | None = None
        self._generation = 0
        self._closing = False

    def __repr__(self) -> str:
        state = "closed" if self._end else ("open" if self._ws else "new")
        return f"<AsyncRealtimeConnection {self.model!r} {state} reconnects={self.reconnects}>"

    async def __aenter__(self) -> AsyncRealtimeConnection:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect (Connection-category failures retried within the budget), then send the session."""
        self._changed = asyncio.Condition()
        self._call = CallRecord(REALTIME.method, REALTIME.path, REALTIME.name, self.model, streamed=True)
        try:
            ws = await self._connect_with_budget()
        except GatewayError as exc:
            self._call.status, self._call.retries = getattr(exc, "status", None), self.reconnects
            self._call.request_id = getattr(exc, "request_id", None)
            if self._ledger is not None:
                self._call.record(self._ledger, complete=False, error=exc)
            raise
        self._call.status = ws.response.status_code if ws.response else None
        self._call.request_id = request_id_of(ws.response.headers) if ws.response else None
        await self._resend_session(ws)
        self._ws, self._generation = ws, 1
        self._reader = asyncio.create_task(self._read_forever(), name=f"realtime reader {self.model}")

    async def close(self) -> None:
        """Close the socket and stop the reader; events already queued can still be read."""
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._ws is not None:
            await self._ws.close()
        await self._ended(_End(None))

    async def _transmit(self, message: Mapping[str, Any]) -> None:
        if self._end is not None:
            raise self._end.error or ConnectionFailed("realtime session is closed")
        if self._ws is None:
            raise RuntimeError("call open() (or use `async with`) first")
        generation, text = self._generation, json.dumps(message)
        try:
            await self._ws.send(text)
        except ConnectionClosed:
            # never delivered (websockets refuses to send on a closed socket): one resend is safe
            await self._await_new_socket(generation)
            if self._end is not None:
                raise self._end.error or ConnectionFailed("realtime session is closed") from None
            await self._ws.send(text)

    async def _await_new_socket(self, generation: int) -> None:
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(lambda: self._generation != generation or self._end is not None)

    async def _resend_session(self, ws: ClientConnection) -> None:
        if self._session:
            message = self._stamp({"type": wire.SESSION_UPDATE, "session": self._session})
            # a socket that died already: the reader sees it and reconnects (and re-sends) in turn
            with contextlib.suppress(ConnectionClosed):
                await ws.send(json.dumps(message))

    async def _connect_once(self) -> ClientConnection:
        try:
            return await ws_connect(self.url, additional_headers=self._headers, logger=_WS_LOGGER,
                                    open_timeout=self._open_timeout, max_size=_MAX_MESSAGE_BYTES,
                                    proxy=self._proxy)
        except InvalidStatus as exc:
            raise _handshake_error(exc) from exc
        except (OSError, TimeoutError, EOFError, InvalidHandshake) as exc:
            raise ConnectionFailed(f"realtime handshake failed: {type(exc).__name__}: {exc}", method="GET",
                                   path=REALTIME.path) from exc

    async def _connect_with_budget(self) -> ClientConnection:
        while True:
            try:
                return await self._connect_once()
            except GatewayError as exc:  # 401/403 and other 4xx: never retried
                retryable = isinstance(exc, ConnectionFailed) or \
                    getattr(exc, "status", None) in _RETRYABLE_HANDSHAKE_STATUSES
                if not retryable or self.reconnects >= self.max_reconnects:
                    raise
            await asyncio.sleep(RetryPolicy.backoff(self.reconnects))
            self.reconnects += 1

    async def _read_forever(self) -> None:
        try:
            await self._read_and_reconnect()
        except Exception as exc:  # a bug must end the stream loudly, not leave readers waiting forever
            await self._ended(_End(exc))

    async def _read_and_reconnect(self) -> None:
        assert self._ws is not None
        while True:
            try:
                async for message in self._ws:
                    self._deliver(message)
                return await self._ended(_End(None))  # closed normally by the server: the session ended
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else 1006
                if self._closing:
                    return await self._ended(_End(None))
                if code not in _RECONNECT_CLOSE_CODES or self.reconnects >= self.max_reconnects:
                    return await self._ended(_End(ConnectionFailed(
                        f"realtime connection closed (code {code}) after {self.reconnects} reconnects",
                        method="GET", path=REALTIME.path)))
            try:
                await self._reconnect()
            except GatewayError as exc:
                return await self._ended(_End(exc))

    async def _reconnect(self) -> None:
        """A new socket (within the budget), the session config re-sent, then queued sends let through."""
        await asyncio.sleep(RetryPolicy.backoff(self.reconnects))
        self.reconnects += 1
        ws = await self._connect_with_budget()
        if self._call is not None:
            self._call.retries = self.reconnects
        await self._resend_session(ws)
        assert self._changed is not None
        async with self._changed:
            self._ws = ws
            self._generation += 1
            self._queue.put_nowait(_Reconnected(self._generation))
            self._changed.notify_all()

    async def _ended(self, end: _End) -> None:
        self._finish(end)
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()


def _handshake_error(exc: InvalidStatus) -> GatewayError:
    """A refused upgrade as the status's error class (401 AuthenticationFailed, 403 PermissionDenied...)."""
    response = exc.response
    headers = list(response.headers.raw_items())  # a repeated header is kept, not an error
    return status_error(response.status_code, headers, response.body, method="GET", path=REALTIME.path,
                        family=REALTIME.name, reason="realtime handshake refused")
