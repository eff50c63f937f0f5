"""Run one batch line through the gateway's own route, as if it had come in alone.

The route function is called with a request built in memory (the line's body, the job owner's key
record), so a batch line gets exactly the validation, model permissions and answer of a synchronous
call, and the two cannot drift apart. Nothing here is reachable from outside: it never reads a key.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gwlab.errors import InvalidRequest
from gwlab.local.errors import APIError, error_body
from gwlab.local.store import KeyRecord
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import ANTHROPIC_VERSION, ANTHROPIC_VERSION_HEADER

Route = Callable[[Request, KeyRecord], Awaitable[Any]]


def _routes() -> dict[str, Route]:
    from gwlab.local.routes import chat, embeddings, messages, responses

    routes = {"chat": chat.create_chat_completion, "responses": responses.create_response,
              "embeddings": embeddings.create_embeddings, "messages": messages.create_message}
    return {FAMILIES[name].route: route for name, route in routes.items()}  # the paths: the family table's


@dataclass(frozen=True, slots=True)
class LineAnswer:
    status: int
    body: dict[str, Any]
    usage: tuple[int | None, int | None]


def _request(app: Any, path: str, body: dict[str, Any]) -> Request:
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
               (ANTHROPIC_VERSION_HEADER.encode(), ANTHROPIC_VERSION.encode())]
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "headers": headers,
             "query_string": b"", "app": app, "state": {}, "scheme": "http", "server": ("batch", 0)}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return Request(scope, receive)


async def run_line(app: Any, key: KeyRecord, path: str, body: dict[str, Any]) -> LineAnswer:
    """The answer (status, body, usage) the route gives; a refusal is its error body, never an exception."""
    vendor = "anthropic" if path == FAMILIES["messages"].route else "openai"
    route = _routes().get(path)
    if route is None:
        return _error(vendor, APIError(400, f"'{path}' cannot be called in a batch here", param="url"))
    if body.get("stream"):
        return _error(vendor, APIError(400, "'stream' is not allowed in a batch request", param="stream"))
    request = _request(app, path, body)
    try:
        answer = await route(request, key)
    except APIError as exc:
        return _error(vendor, exc)
    except InvalidRequest as exc:
        return _error(vendor, APIError(400, str(exc), param=exc.field or None))
    except ModuleNotFoundError as exc:
        return _error(vendor, APIError(503, f"This local model needs {exc.name}: pip install 'gwlab[local]'",
                                       code="model_unavailable"))
    if isinstance(answer, Response):
        answer = json.loads(bytes(answer.body))
    usage = getattr(request.state, "usage", None) or (None, None)
    return LineAnswer(200, answer, usage)


def _error(vendor: str, exc: APIError) -> LineAnswer:
    return LineAnswer(exc.status, error_body(vendor, exc.status, exc.message, code=exc.code, param=exc.param),
                      (None, None))
