"""Errors of the local gateway, rendered in the body shape of the family the path belongs to."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from gwlab.wire.families import by_path

# (OpenAI error type, Anthropic error type) per status: protocols.md sections 4.5 and 5
_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("invalid_request_error", "authentication_error"),
    403: ("permission_error", "permission_error"),
    404: ("invalid_request_error", "not_found_error"),
    405: ("invalid_request_error", "invalid_request_error"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "invalid_request_error"),
    422: ("invalid_request_error", "invalid_request_error"),
    429: ("rate_limit_exceeded", "rate_limit_error"),
    500: ("server_error", "api_error"),
}


class APIError(Exception):
    """Raised anywhere in the gateway; the handler renders it for the caller's protocol family."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 type: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.type = type
        self.headers = headers or {}


def vendor_of(path: str) -> str:
    """Whose error shape and request-id header a path speaks: its family's vendor (openai by default)."""
    family = by_path(path)
    return family.vendor if family is not None else "openai"


def error_body(family: str, status: int, message: str, *, code: str | None = None, param: str | None = None,
               type: str | None = None, request_id: str | None = None) -> dict[str, Any]:
    openai_type, anthropic_type = _TYPES.get(status, _TYPES[500 if status >= 500 else 400])
    if family == "anthropic":
        # `type` overrides the OpenAI error type only ("requests" on a 429): Anthropic's types go by status
        body: dict[str, Any] = {"type": "error", "error": {"type": anthropic_type, "message": message}}
        if request_id:
            body["request_id"] = request_id
        return body
    if family == "typesafe":
        error_type = "authentication_error" if status == 401 else (code or type or openai_type)
        detail = {"message": message, "error_type": error_type, **({"param": param} if param else {})}
        return {"detail": detail}
    return {"error": {"message": message, "type": type or openai_type, "param": param, "code": code}}


def error_response(path: str, error: APIError, request_id: str | None) -> JSONResponse:
    body = error_body(vendor_of(path), error.status, error.message, code=error.code, param=error.param,
                      type=error.type, request_id=request_id)
    return JSONResponse(body, status_code=error.status, headers=error.headers)
