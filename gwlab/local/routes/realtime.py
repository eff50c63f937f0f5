"""Realtime: ephemeral tokens, the WebSocket session and WebRTC negotiation (spec; protocols.md §6).

Credentials: `Authorization: Bearer <key or ek_ token>` with `OpenAI-Beta: realtime=v1` (what the SDKs
send), or the browser subprotocols `realtime`, `openai-insecure-api-key.<KEY>`, `openai-beta.realtime-v1`
(answered with `realtime`). A refused handshake gets an HTTP denial response (401/403/404/400) before
any upgrade. The session itself lives in `realtime_session.py`, shared with WebRTC.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from gwlab.errors import InvalidEvent
from gwlab.local import catalog, textgen
from gwlab.local.auth import authenticate, bearer_token, require_key, require_model
from gwlab.local.body import read_json
from gwlab.local.engines.turns import OWNER
from gwlab.local.errors import APIError, error_body
from gwlab.local.realtime.session import ServerSession
from gwlab.local.store import KeyRecord
from gwlab.wire.limits import (
    API_PREFIX,
    EPHEMERAL_TOKEN_SECONDS,
    OPENAI_BETA_HEADER,
    REALTIME_BETA,
    REALTIME_BETA_SUBPROTOCOL,
    REALTIME_KEY_SUBPROTOCOL_PREFIX,
    REALTIME_SUBPROTOCOL,
)
from gwlab.wire.realtime import session as rt

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["realtime"])

DEFAULT_MODEL = catalog.REALTIME_DEFAULT  # POST /realtime/sessions may omit the model
EPHEMERAL_PREFIX = "ek_"


# --- credentials shared by the three endpoints ----------------------------------------------------------
def _unauthorized(message: str) -> APIError:
    return APIError(401, message, code="invalid_api_key")


def resolve(conn: HTTPConnection, secret: str | None, *, ephemeral_only: bool = False
            ) -> tuple[KeyRecord, str | None, dict[str, Any] | None]:
    """The key behind a long-lived key or an ephemeral token; a token is spent here, once.

    Returns the key, and for a token the model and session configuration it was created with."""
    store = conn.app.state.store
    if secret and secret.startswith(EPHEMERAL_PREFIX):
        redeemed = store.redeem_ephemeral(secret)
        if redeemed is None:
            raise _unauthorized("This ephemeral token is expired, already used or unknown; get a new one "
                                "from POST /v1/realtime/sessions (tokens last "
                                f"{EPHEMERAL_TOKEN_SECONDS} s and open one connection)")
        key_id, model, session = redeemed
        key = next((k for k in store.list_keys() if k.id == key_id), None)
        if key is None or key.status != "active":
            raise _unauthorized("The key that created this ephemeral token is disabled or deleted")
        conn.state.key_id = key.id
        OWNER.set(key.id)  # as authenticate() does: the engine's turns go round between keys
        conn.state.ratelimit_headers = conn.app.state.limiter.acquire(key.id)
        return key, model, session
    if ephemeral_only:
        raise _unauthorized("WebRTC negotiation takes an ephemeral token (ek_...) from POST "
                            f"{API_PREFIX}/realtime/sessions, never a long-lived key")
    return authenticate(conn, secret), None, None  # type: ignore[arg-type]  # needs only headers and app


def _rate_limiter(conn: HTTPConnection, key: KeyRecord) -> Any:
    limiter = conn.app.state.limiter
    return (lambda: limiter.acquire(key.id)) if limiter.rpm or limiter.tpm else None


def _model(conn: HTTPConnection, key: KeyRecord, query_model: str | None, token_model: str | None) -> str:
    if query_model and token_model and query_model != token_model:
        raise _unauthorized(f"This ephemeral token was created for the model '{token_model}', "
                            f"not '{query_model}'")
    model = query_model or token_model
    if not model:
        raise APIError(400, "Missing query parameter 'model' (…/v1/realtime?model=<model id>)", param="model")
    info = require_model(key, model, "realtime")
    conn.state.model = info.id
    return info.id


def _check_query_model(model: str | None) -> None:
    """An unknown model is refused before a token is spent on it."""
    if model and catalog.find(model) is None:
        raise APIError(404, f"The model '{model}' does not exist", code="model_not_found", param="model")


# --- POST /v1/realtime/sessions ---------------------------------------------------------------------------
@router.post("/realtime/sessions")
async def create_session(request: Request, key: Annotated[KeyRecord, Depends(require_key)]) -> dict[str, Any]:
    """An ephemeral token for one connection within a minute (OpenAI-Beta is ignored here, §6.2)."""
    body = await read_json(request)
    info = require_model(key, body.get("model") or DEFAULT_MODEL, "realtime")
    request.state.model = info.id
    fields = {k: v for k, v in body.items() if k not in ("model", "client_secret")}
    try:
        config = rt.update_session(rt.default_session(), fields, "")
    except InvalidEvent as exc:
        raise APIError(400, str(exc), code=exc.code, param=exc.field or None) from None
    session_id = textgen.new_id("sess_")
    token, expires_at = request.app.state.store.create_ephemeral(
        key.id, info.id, {"id": session_id, **config}, EPHEMERAL_TOKEN_SECONDS)
    return {"id": session_id, "object": "realtime.session", "model": info.id, **config,
            "expires_at": int(expires_at), "client_secret": {"value": token, "expires_at": int(expires_at)}}


# --- the WebSocket session --------------------------------------------------------------------------------
def _offered(websocket: WebSocket) -> list[str]:
    return [p.strip() for p in websocket.scope.get("subprotocols", []) if p.strip()]


def _handshake(websocket: WebSocket) -> tuple[KeyRecord, str, dict[str, Any] | None]:
    offered = _offered(websocket)
    beta = websocket.headers.get(OPENAI_BETA_HEADER, "")
    if REALTIME_BETA not in [b.strip() for b in beta.split(",")] and REALTIME_BETA_SUBPROTOCOL not in offered:
        raise APIError(400, f"Missing header 'OpenAI-Beta: {REALTIME_BETA}' (or the subprotocol "
                       f"{REALTIME_BETA_SUBPROTOCOL})", param="OpenAI-Beta")
    secret = bearer_token(websocket)  # type: ignore[arg-type]  # reads only the headers
    if secret is None:
        secret = next((p[len(REALTIME_KEY_SUBPROTOCOL_PREFIX):] for p in offered
                       if p.startswith(REALTIME_KEY_SUBPROTOCOL_PREFIX)), None)
    query_model = websocket.query_params.get("model")
    _check_query_model(query_model)
    key, token_model, config = resolve(websocket, secret)
    return key, _model(websocket, key, query_model, token_model), config


async def _refuse(websocket: WebSocket, error: APIError) -> None:
    body = error_body("openai", error.status, error.message, code=error.code, param=error.param)
    try:
        await websocket.send_denial_response(JSONResponse(body, status_code=error.status))
    except RuntimeError:  # a server without the denial extension: a plain refusal (HTTP 403)
        await websocket.close(code=1008, reason=error.message[:120])


@router.websocket("/realtime")
async def realtime_socket(websocket: WebSocket) -> None:
    try:
        key, model, config = _handshake(websocket)
    except APIError as error:
        await _refuse(websocket, error)
        return
    try:
        outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        session = ServerSession(outbox.put_nowait, model=model, config=config,
                                rate_limit=_rate_limiter(websocket, key), max_buffer_bytes=_buffer_cap(websocket))
    except InvalidEvent as exc:  # a token's stored configuration no longer validates
        await _refuse(websocket, APIError(400, str(exc), param=exc.field or None))
        return
    slots = websocket.app.state.realtime_slots
    try:
        slots.take(key.id)
    except APIError as error:
        await _refuse(websocket, error)
        return
    try:
        await _converse(websocket, session, outbox)
    finally:
        slots.give_back(key.id)
        websocket.app.state.limiter.spend(key.id, sum(session.usage))


def _buffer_cap(conn: HTTPConnection) -> int | None:
    cap: int | None = conn.app.state.settings.limits.realtime_buffer_bytes
    return cap


async def _converse(websocket: WebSocket, session: ServerSession, outbox: asyncio.Queue[dict[str, Any]]) -> None:
    """The accepted session: client frames in, server events out, until either side ends it."""
    await websocket.accept(subprotocol=REALTIME_SUBPROTOCOL if REALTIME_SUBPROTOCOL in _offered(websocket)
                           else None)
    writer = asyncio.create_task(_write(websocket, outbox))
    await session.start()
    try:
        while True:
            remaining = session.expires_at - time.time()
            if remaining <= 0:
                session.emit(rt.ERROR, error={"type": "invalid_request_error", "code": "session_expired",
                                              "message": "The session reached its 30-minute limit; open a "
                                              "new one", "param": None, "event_id": None})
                break
            try:
                message = await asyncio.wait_for(websocket.receive(), timeout=remaining)
            except TimeoutError:
                continue
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            await session.handle(text if text is not None else message.get("bytes") or b"")
    except WebSocketDisconnect:
        pass
    finally:
        await session.close()
        websocket.state.usage = tuple(session.usage)
        await _drain(outbox, writer)
        if websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(Exception):
                await websocket.close()


async def _write(websocket: WebSocket, outbox: asyncio.Queue[dict[str, Any]]) -> None:
    """The only sender on the socket, so events leave in the order the session emitted them."""
    try:
        while True:
            event = await outbox.get()
            await websocket.send_text(json.dumps(event, separators=(",", ":")))
            outbox.task_done()
    except Exception:  # the client went away: nothing left to deliver to
        while not outbox.empty():
            outbox.get_nowait()
            outbox.task_done()


async def _drain(outbox: asyncio.Queue[dict[str, Any]], writer: asyncio.Task[None]) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(outbox.join(), timeout=2)
    writer.cancel()
    with contextlib.suppress(BaseException):
        await writer


# --- WebRTC negotiation -----------------------------------------------------------------------------------
@router.post("/realtime")
async def negotiate_webrtc(request: Request) -> Response:
    """An SDP offer in, the SDP answer out (201, application/sdp); events then flow on `oai-events`."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/sdp":
        raise APIError(415, f"Content-Type must be application/sdp, got {media_type or 'none'!r}",
                       param="Content-Type")
    query_model = request.query_params.get("model")
    _check_query_model(query_model)
    key, token_model, config = resolve(request, bearer_token(request), ephemeral_only=True)
    model = _model(request, key, query_model, token_model)
    offer = (await request.body()).decode("utf-8", "replace")
    if "v=0" not in offer:
        raise APIError(400, "The body is not an SDP offer", param="body")
    try:
        from gwlab.local.realtime import webrtc
    except ImportError:  # pragma: no cover - aiortc is the optional `rtc` extra
        raise APIError(501, "WebRTC needs the optional extra: pip install 'gwlab[rtc]'") from None
    slots = request.app.state.realtime_slots
    slots.take(key.id)
    try:
        answer = await webrtc.answer(request.app, offer, model=model, config=config,
                                     rate_limit=_rate_limiter(request, key), max_buffer_bytes=_buffer_cap(request),
                                     on_close=lambda: slots.give_back(key.id))
    except BaseException:
        slots.give_back(key.id)
        raise
    return Response(answer, status_code=201, media_type="application/sdp")
