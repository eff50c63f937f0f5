"""Pure ASGI middleware: a request id on every response, the body size cap, and the request log.

It wraps `send` to note the status and to log once the last body chunk has gone, so streamed
responses pass untouched and are logged with their final usage. No header, no body is logged."""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gwlab.local import catalog
from gwlab.local.body import BodyTooLarge
from gwlab.local.errors import vendor_of
from gwlab.wire.limits import GATEWAY_ID_HEADER, REQUEST_ID_HEADER

_VENDOR_HEADER = {"anthropic": b"request-id", "typesafe": b"x-typesafe-request-id"}


def new_request_id() -> str:
    return "req_" + secrets.token_hex(12)


class RequestContext:
    def __init__(self, app: ASGIApp, store: Any, max_body_bytes: int,
                 path_caps: dict[str, int] | None = None) -> None:
        self.app, self.store, self.max_body_bytes = app, store, max_body_bytes
        self.path_caps = path_caps or {}  # exact paths with their own cap (batch uploads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        state = scope.setdefault("state", {})
        request_id = state["request_id"] = new_request_id()
        started, status, received = time.perf_counter(), 0, 0
        path = scope["path"]
        cap = self.path_caps.get(path, self.max_body_bytes)
        extra = [(REQUEST_ID_HEADER.encode(), request_id.encode()),
                 (GATEWAY_ID_HEADER.encode(), catalog.gateway_identity().encode())]
        if header := _VENDOR_HEADER.get(vendor_of(path)):
            extra.append((header, request_id.encode()))

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    raise BodyTooLarge()
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), *extra]
                headers += [(k.encode(), v.encode()) for k, v in (state.get("ratelimit_headers") or {}).items()]
                message = {**message, "headers": headers}
            elif message["type"] == "websocket.accept":
                status = 101
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            elif message["type"] == "websocket.http.response.start":  # a handshake refused with a body
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # logged before the last chunk leaves: once a client holds a whole answer, the log has it
                self._log(scope, state, status, started)
            await send(message)

        if scope["type"] == "http" and _declared_length(scope) > cap:
            state["body_too_large"] = True
        try:
            await self.app(scope, capped_receive, tracked_send)
        finally:
            if scope["type"] == "websocket":  # no status: closed before accepting, which servers send as 403
                self._log(scope, state, status or 403, started)
            else:  # a stream the client cut, or a crash answered outside this middleware: logged all the same
                # (499, nginx's "client closed request": the client left before any answer, guard.py)
                self._log(scope, state, status or (499 if state.get("client_closed") else 500), started)

    def _log(self, scope: Scope, state: dict[str, Any], status: int, started: float) -> None:
        if state.get("logged"):
            return
        state["logged"] = True
        usage = state.get("usage") or (None, None)
        self.store.log_request({
            "ts": time.time(), "request_id": state["request_id"], "key_id": state.get("key_id"),
            "method": scope.get("method", "WS"), "path": scope["path"], "model": state.get("model"),
            "status": status, "latency_ms": (time.perf_counter() - started) * 1000,
            "input_tokens": usage[0], "output_tokens": usage[1], "streamed": int(bool(state.get("streamed"))),
        })


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0
