"""Reading untrusted request bodies: every failure is a 4xx that names the field, never a 5xx.

A compressed body is expanded against the body limit as it is expanded, never after: a small gzip or zstd
bomb is a 413 once its output passes the limit, and a zstd frame whose header declares more is refused
before anything is allocated (zstandard's one-shot `decompress` allocates the declared size; issue 30)."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from fastapi import Request

from gwlab.local.errors import APIError


class BodyTooLarge(Exception):
    """Raised while reading a body past the configured size; rendered as 413."""


_CHUNK = 1 << 20  # decompressed bytes produced per step: the most a bomb adds before the budget is checked


def _decode(raw: bytes, encoding: str, limit: int) -> bytes:
    """The body as sent, expanded; BodyTooLarge as soon as the output passes `limit` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        return _gunzip(raw, limit)
    if encoding == "zstd":  # typesafe-sdk compresses bodies >= 1 KiB (protocols.md 7.4)
        return _unzstd(raw, limit)
    raise APIError(415, f"Unsupported Content-Encoding {encoding!r}; use identity, gzip or zstd",
                   param="Content-Encoding")


def _gunzip(raw: bytes, limit: int) -> bytes:
    """gzip, member after member (as `gzip.decompress`), never producing more than `limit` + 1 bytes."""
    out = bytearray()
    while raw:
        inflater, pending = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), raw
        while not inflater.eof:
            chunk = inflater.decompress(pending, min(_CHUNK, limit + 1 - len(out)))
            out += chunk
            if len(out) > limit:
                raise BodyTooLarge()
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                raise ValueError("the gzip stream ends before its end marker")
        raw = inflater.unused_data
    return bytes(out)


def _unzstd(raw: bytes, limit: int) -> bytes:
    """zstd frames read as a stream (the output buffer never exceeds `limit` + 1 bytes); a frame whose
    header declares more than `limit` is refused before decompressing anything."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise APIError(415, "Content-Encoding zstd is not available here; send the body uncompressed",
                       param="Content-Encoding") from None
    if zstandard.frame_content_size(raw) > limit:  # -1: not declared, then the stream's budget holds
        raise BodyTooLarge()
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
        while chunk := reader.read(min(_CHUNK, limit + 1 - len(out))):
            out += chunk
            if len(out) > limit:
                raise BodyTooLarge()
    return bytes(out)


async def read_json(request: Request) -> dict[str, Any]:
    """The JSON object of a request, checked for media type, encoding, syntax and shape."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise APIError(415, f"Content-Type must be application/json, got {media_type or 'none'!r}",
                       param="Content-Type")
    if getattr(request.state, "body_too_large", False):  # declared Content-Length: refuse before reading
        raise BodyTooLarge()
    raw = await request.body()
    limit = request.app.state.settings.max_body_bytes
    try:
        raw = _decode(raw, request.headers.get("content-encoding", ""), limit)
    except (APIError, BodyTooLarge):
        raise
    except Exception as exc:
        raise APIError(400, f"The body could not be decompressed: {exc}", param="Content-Encoding") from None
    if len(raw) > limit:
        raise BodyTooLarge()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise APIError(400, f"The body is not valid JSON: {exc}", param="body") from None
    except RecursionError:  # the decoder recurses per nesting level; a deep body must not become a 500
        raise APIError(400, "The body is nested too deeply to read", param="body") from None
    if not isinstance(body, dict):
        raise APIError(400, f"The body must be a JSON object, got {type(body).__name__}", param="body")
    # json.loads reads bytes with "surrogatepass", so escapes and non-ASCII bytes can both carry one
    if not raw.isascii() or _ESCAPED_SURROGATE.search(raw):
        refuse_lone_surrogates(body)
    return body


_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a pair escaped in JSON decodes to one character


def refuse_lone_surrogates(body: dict[str, Any]) -> None:
    """A 400 naming the first field (or key) whose text holds a lone UTF-16 surrogate: such text is not
    Unicode, cannot be encoded as UTF-8, and would otherwise fail deep in a tokenizer as a 500."""
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str) and _LONE_SURROGATE.search(value):
            raise APIError(400, f"'{where}' holds a lone UTF-16 surrogate, which is not valid Unicode text",
                           param=where)
        if isinstance(value, dict):
            for name, item in reversed(value.items()):
                path = f"{where}.{name}" if where else str(name)
                if _LONE_SURROGATE.search(name):
                    raise APIError(400, f"A field name in '{where or 'body'}' holds a lone UTF-16 surrogate, "
                                   "which is not valid Unicode text", param=where or "body")
                stack.append((path, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))


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
