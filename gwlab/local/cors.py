"""Cross-origin access for the one endpoint a browser calls itself: the WebRTC SDP exchange.

A notebook page (say JupyterLab on :8888) that opens a WebRTC session posts its SDP offer straight to
the gateway (another port, so another origin). That endpoint accepts ephemeral tokens only, so letting
any origin call it hands a page nothing it did not already hold. Every other path keeps the browser's
same-origin rule: a page can never spend a long-lived key against the gateway, because browsers refuse
to send it cross-origin without these headers.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import AUTHORIZATION_HEADER, OPENAI_BETA_HEADER, REQUEST_ID_HEADER

BROWSER_PATHS = frozenset({FAMILIES["realtime"].route})
ALLOW_METHODS = "POST"
ALLOW_HEADERS = f"{AUTHORIZATION_HEADER}, content-type, {OPENAI_BETA_HEADER}"
EXPOSE_HEADERS = f"{REQUEST_ID_HEADER}, location"
MAX_AGE_S = "600"


class BrowserAccess:
    """Answers preflights and adds the response headers on BROWSER_PATHS; elsewhere it stays out of the way."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in BROWSER_PATHS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if "origin" not in headers:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await _preflight(send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = MutableHeaders(scope=message)
                extra["access-control-allow-origin"] = "*"
                extra["access-control-expose-headers"] = EXPOSE_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_cors)


async def _preflight(send: Send) -> None:
    headers = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-methods", ALLOW_METHODS.encode()),
               (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
               (b"access-control-max-age", MAX_AGE_S.encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
