"""Who is calling: the spec's Authentication section, per protocol family."""

from __future__ import annotations

from fastapi import Request

from gwlab.local import catalog
from gwlab.local.engines.turns import OWNER
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord
from gwlab.wire.limits import (
    ANTHROPIC_VERSION_HEADER,
    ANTHROPIC_VERSIONS_ACCEPTED,
    API_KEY_HEADER,
    AUTHORIZATION_HEADER,
)


def _unauthorized(message: str) -> APIError:
    return APIError(401, message, code="invalid_api_key")


def bearer_token(request: Request) -> str | None:
    """The Bearer token, None when absent; a malformed Authorization header is a 401 of its own."""
    header = request.headers.get(AUTHORIZATION_HEADER)
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip() or " " in token.strip():
        raise _unauthorized("Malformed Authorization header: expected 'Bearer <API key>'")
    return token.strip()


def authenticate(request: Request, secret: str | None) -> KeyRecord:
    """Resolve a secret to an active key and apply its rate limit."""
    if not secret:
        raise _unauthorized("Missing API key: send 'Authorization: Bearer <API key>'")
    key: KeyRecord | None = request.app.state.store.find_key(secret)
    if key is None:
        raise _unauthorized("Invalid API key")
    if key.status != "active":
        raise _unauthorized("This API key is disabled")
    request.state.key_id = key.id
    OWNER.set(key.id)  # the text engine's turns are shared fairly between keys (engines/turns.py)
    request.state.ratelimit_headers = request.app.state.limiter.acquire(key.id)
    return key


async def require_key(request: Request) -> KeyRecord:
    """Most endpoints: `Authorization: Bearer <API key>`."""
    return authenticate(request, bearer_token(request))


async def require_messages_key(request: Request) -> KeyRecord:
    """Messages family: `x-api-key` (the spec) or Bearer (anthropic SDK 2.x), plus a known version."""
    secret = request.headers.get(API_KEY_HEADER) or bearer_token(request)
    key = authenticate(request, secret)
    version = request.headers.get(ANTHROPIC_VERSION_HEADER)
    if version is None:
        raise APIError(400, "Missing header anthropic-version (use 2023-06-01)", param=ANTHROPIC_VERSION_HEADER)
    if version not in ANTHROPIC_VERSIONS_ACCEPTED:
        raise APIError(400, f"Unsupported anthropic-version {version!r}; accepted: "
                       + ", ".join(ANTHROPIC_VERSIONS_ACCEPTED), param=ANTHROPIC_VERSION_HEADER)
    return key


def require_model(key: KeyRecord, model_id: object, family: str, *, param: str = "model") -> catalog.ModelInfo:
    """An existing model this key may use, through a family it supports.

    Unknown model: 404. A model that exists but is not allowed to the key: 403, so an operator can
    tell a typo from a permission problem (the key's own /models listing hides it either way)."""
    if not isinstance(model_id, str) or not model_id:
        raise APIError(400, f"'{param}' must be a non-empty string", param=param)
    info = catalog.find(model_id)
    if info is None:
        raise APIError(404, f"The model '{model_id}' does not exist", code="model_not_found", param=param)
    if not key.allows(model_id):
        raise APIError(403, f"This key may not use the model '{model_id}'", code="model_not_permitted",
                       param=param)
    if family not in info.supports:
        raise APIError(400, f"The model '{model_id}' does not support {family}; it supports "
                       + ", ".join(info.supports), code="model_not_supported", param=param)
    return info
