"""Pure ASGI middleware on each HTTP request: a deadline for its body, and no work for a client that left.

Body: a request body must arrive within `body_timeout_s` of the request's start, else `BodyTimeout`
(a 408 that closes the connection): a body trickled a byte at a time no longer holds a connection.
Disconnect: once the body has arrived, this middleware alone reads the ASGI receive channel, where
uvicorn reports the client's disconnect; if the client leaves before its response has ended, the
request's task is cancelled, so a non-streamed generation stops between two tokens as a streamed one
does (the engine's worker sees its stop event: `streaming.iterate_in_thread`). The app's own later
`receive` calls (Starlette's disconnect listener) get the disconnect from here."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTimeout(Exception):
    """The request body did not arrive within the deadline; rendered as 408 (app.py)."""


class ConnectionGuard:
    def __init__(self, app: ASGIApp, body_timeout_s: float | None) -> None:
        self.app, self.body_timeout_s = app, body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        await _Exchange(scope, receive, send, self.body_timeout_s).run(self.app)


class _Exchange:
    """One request's channels, wrapped: the body deadline on receive, the response's end on send."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, body_timeout_s: float | None) -> None:
        self.scope, self._receive, self._send = scope, receive, send
        loop = asyncio.get_running_loop()
        self._deadline = None if body_timeout_s is None else loop.time() + body_timeout_s
        self._body_done = self._response_done = self._left = False
        self._gone = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def run(self, app: ASGIApp) -> None:
        self._task = asyncio.ensure_future(app(self.scope, self.receive, self.send))
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._left or not self._task.cancelled():
                raise  # cancelled from outside (shutdown): not ours to swallow
            self.scope.setdefault("state", {})["client_closed"] = True
        finally:
            self._charge()
            if self._watcher is not None:
                self._watcher.cancel()
                with contextlib.suppress(BaseException):
                    await self._watcher

    async def receive(self) -> Message:
        if self._body_done:  # the watcher owns the channel now
            await self._gone.wait()
            return {"type": "http.disconnect"}
        message = await self._next_body_message()
        if message["type"] == "http.disconnect":
            self._body_done = True
            self._gone.set()
        elif not message.get("more_body", False):
            self._body_done = True
            self._watcher = asyncio.ensure_future(self._watch())
        return message

    async def _next_body_message(self) -> Message:
        if self._deadline is None:
            return await self._receive()
        remaining = self._deadline - asyncio.get_running_loop().time()
        try:
            return await asyncio.wait_for(self._receive(), max(remaining, 0.0))
        except TimeoutError:
            raise BodyTimeout() from None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self._response_done = True
            self._charge()  # before the last chunk leaves: a client holding its answer sees its budget spent
        await self._send(message)

    def _charge(self) -> None:
        """The tokens this request used, charged once to its key's token budget (ratelimit.py)."""
        state, app = self.scope.get("state", {}), self.scope.get("app")
        usage, key_id = state.get("usage"), state.get("key_id")
        if usage and key_id is not None and app is not None and not state.get("charged"):
            state["charged"] = True
            app.state.limiter.spend(key_id, sum(n or 0 for n in usage))

    async def _watch(self) -> None:
        """Wait for the disconnect (uvicorn also reports one once the response is complete: then it is moot)."""
        message: Any = await self._receive()
        if message["type"] != "http.disconnect" or self._response_done:
            return
        self._gone.set()
        self._left = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

