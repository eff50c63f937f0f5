"""Reading untrusted request bodies: every failure is a 4xx that names the field, never a 5xx."""

from __future__ import annotations

import gzip
import json
from typing import Any

from fastapi import Request

from gwlab.local.errors import APIError


class BodyTooLarge(Exception):
    """Raised while reading a body past the configured size; rendered as 413."""


def _decode(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "zstd":  # typesafe-sdk compresses bodies >= 1 KiB (protocols.md 7.4)
        try:
            import zstandard
        except ImportError:  # pragma: no cover - zstandard is a dependency
            raise APIError(415, "Content-Encoding zstd is not available here; send the body uncompressed",
                           param="Content-Encoding") from None
        return zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 30)
    raise APIError(415, f"Unsupported Content-Encoding {encoding!r}; use identity, gzip or zstd",
                   param="Content-Encoding")


async def read_json(request: Request) -> dict[str, Any]:
    """The JSON object of a request, checked for media type, encoding, syntax and shape."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise APIError(415, f"Content-Type must be application/json, got {media_type or 'none'!r}",
                       param="Content-Type")
    if getattr(request.state, "body_too_large", False):  # declared Content-Length: refuse before reading
        raise BodyTooLarge()
    raw = await request.body()
    try:
        raw = _decode(raw, request.headers.get("content-encoding", ""))
    except APIError:
        raise
    except Exception as exc:
        raise APIError(400, f"The body could not be decompressed: {exc}", param="Content-Encoding") from None
    if len(raw) > request.app.state.settings.max_body_bytes:
        raise BodyTooLarge()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise APIError(400, f"The body is not valid JSON: {exc}", param="body") from None
    except RecursionError:  # the decoder recurses per nesting level; a deep body must not become a 500
        raise APIError(400, "The body is nested too deeply to read", param="body") from None
    if not isinstance(body, dict):
        raise APIError(400, f"The body must be a JSON object, got {type(body).__name__}", param="body")
    return body


_JSON_TYPES: dict[type, str] = {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
                                list: "an array", dict: "an object"}


def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = False,
          default: Any = None, path: str | None = None) -> Any:
    """A typed field of a body: missing or mistyped fields are 400s naming the field."""
    where = path or name
    if name not in body or body[name] is None:
        if required:
            raise APIError(400, f"Missing required field '{where}'", param=where)
        return default
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and int not in kinds:
        kinds = (*kinds, int)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        shown = [k for k in kinds if k is not int or float not in kinds]
        wanted = " or ".join(_JSON_TYPES.get(k, k.__name__) for k in shown)
        raise APIError(400, f"'{where}' must be {wanted}, got {type(value).__name__}", param=where)
    return value
