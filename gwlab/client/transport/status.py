"""How an answer becomes gwlab's error: an httpx failure, a status >= 400 (class, the gateway's message,
a hint, the request id), and the wait a 429/503 asks for. Pure but for reading headers.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from gwlab import errors
from gwlab.client import dialect as _dialect  # `dialect` is AsyncTransport's parameter and property
from gwlab.wire import limits

__all__ = ["GUIDE", "is_json", "media_type_of", "request_id_of", "retry_after_seconds", "status_error",
           "translate"]


# --- errors --------------------------------------------------------------------------------------


def translate(exc: httpx.HTTPError, method: str, path: str) -> errors.GatewayError:
    """The gwlab error for an httpx failure (the one place they are mapped)."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        kind = {httpx.ConnectTimeout: "connecting", httpx.ReadTimeout: "waiting for the answer",
                httpx.WriteTimeout: "sending", httpx.PoolTimeout: "waiting for a free connection"}
        phase = kind.get(type(exc), "in transit")
        return errors.Timeout(f"timed out {phase} ({detail})", method=method, path=path)
    if isinstance(exc, httpx.ConnectError):
        return errors.ConnectionFailed(f"could not connect: {detail}; is the gateway running there?",
                                       method=method, path=path)
    return errors.ConnectionFailed(f"connection failed: {type(exc).__name__}: {detail}",
                                   method=method, path=path)


_HINTS = {401: "check the API key (GWLAB_API_KEY) and that it is enabled",
          403: "the key may not use this model or resource",
          404: "no such model or resource: check the model ID (gw.models()) and the resource ID"}
GUIDE = "docs/guide/byo-gateway.md"


def _hint(status: int, body: Any, family: str, method: str, path: str) -> str | None:
    """What to do about an error status; a 404 says whether the route or the model/resource is missing."""
    if status == 404 and _dialect.route_missing(body):
        return (f"no such route on this gateway: it does not serve {method} {limits.API_PREFIX}{path}, so it "
                f"may not offer the {family} family there; see {GUIDE} (dialect= sets another route)")
    return _HINTS.get(status)


def retry_after_seconds(headers: httpx.Headers | Mapping[str, str]) -> float | None:
    """The wait a 429/503 asks for: `retry-after-ms`, else `Retry-After` as seconds or an HTTP date."""
    value = headers.get(limits.RETRY_AFTER_MS_HEADER)
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get(limits.RETRY_AFTER_HEADER)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


def request_id_of(headers: Mapping[str, str]) -> str | None:
    """The request id of an answer, from the first header `limits.REQUEST_ID_HEADERS` lists that it carries."""
    for name in limits.REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def media_type_of(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower()


def is_json(media_type: str) -> bool:
    return media_type == "application/json" or media_type.endswith("+json")


# the most specific class per status; others: ServerError for 5xx, else StatusError
_STATUS_CLASSES: dict[int, type[errors.StatusError]] = {
    400: errors.BadRequest, 401: errors.AuthenticationFailed, 403: errors.PermissionDenied, 404: errors.NotFound,
    413: errors.BadRequest, 415: errors.BadRequest, 422: errors.BadRequest, 429: errors.RateLimited,
}


def status_error(status: int, headers: Mapping[str, str] | list[tuple[str, str]], content: bytes | str | None, *,
                 method: str, path: str,
                 family: str = "", reason: str | None = None, request_id: str | None = None,
                 scrub: Callable[[Any], Any] = lambda value: value) -> errors.StatusError:
    """The error of a status >= 400, for every caller (HTTP families, the realtime handshake, WebRTC's
    offer): the status's class, the gateway's own message (field named) and a hint, the request id from
    any header `limits.REQUEST_ID_HEADERS` lists (else the body's `request_id`). Pure: `scrub` takes
    the key out of the body before it reaches the exception."""
    headers = httpx.Headers(headers)
    body: Any = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if body and (is_json(media_type) or (not media_type and body.lstrip().startswith("{"))):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    body = scrub(body or None)
    request_id = request_id or request_id_of(headers)
    if request_id is None and isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    cls = _STATUS_CLASSES.get(status, errors.ServerError if status >= 500 else errors.StatusError)
    message = _message(body) or reason or "HTTP error"
    hint = _hint(status, body, family, method, path)
    kwargs: dict[str, Any] = {"status": status, "body": body, "request_id": request_id, "method": method,
                              "path": path, "headers": headers}
    if cls is errors.RateLimited:
        kwargs["retry_after"] = retry_after_seconds(headers)
    return cls(f"{message} ({hint})" if hint else message, **kwargs)


def _message(body: Any) -> str | None:
    """The error text of any family's body (OpenAI/Anthropic `error.message`, FastAPI `detail`)."""
    if isinstance(body, str):
        return body.strip()[:500] or None
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body.get("detail", body))
    if isinstance(error, str):
        return error[:500]
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        where = errors.field_of(body)  # System One's `field`, OpenAI's `param`: keep the field named
        text = error["message"][:500]
        return f"{where}: {text}" if where and where not in text else text
    if isinstance(error, list) and error and isinstance(error[0], Mapping):  # FastAPI validation errors
        first = error[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
    return body.get("message") if isinstance(body.get("message"), str) else None
