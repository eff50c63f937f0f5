"""The embeddings family (`POST /embeddings`, OpenAI's shape): the request checked once for the client and
the local gateway alike, and the typed answer.

`input` is one string or a list of strings; token arrays (which OpenAI also takes) are refused naming
`input`: a gateway's tokenizer is not the caller's. `encoding_format` "base64" carries each vector as the
base64 of its little-endian float32 bytes, as OpenAI does; the reader decodes it back to floats.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire import generation as gen

__all__ = ["ENCODINGS", "MAX_INPUTS", "EmbeddingsRequest", "EmbeddingsResult", "build_request", "encode_vector",
           "parse_request", "parse_response"]

ENCODINGS = ("float", "base64")
MAX_INPUTS = 2048  # the official API's bound on `input` items


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    """An embeddings body the validator accepted."""

    model: str
    inputs: tuple[str, ...]
    encoding_format: str  # "float" unless asked otherwise
    dimensions: int | None  # None: the model's own
    body: Mapping[str, Any] = field(repr=False)


def parse_request(body: Any) -> EmbeddingsRequest:
    """Validate an embeddings body; raises only `InvalidRequest`, naming the field."""
    model = gen.model_of(body)
    value = body.get("input")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_INPUTS:
        raise InvalidRequest("input", f"must be a string or an array of 1 to {MAX_INPUTS} strings")
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise InvalidRequest(f"input[{i}]", "must be a string (token arrays are not accepted: send the text)")
        if not text.strip():
            raise InvalidRequest(f"input[{i}]", "must not be empty")
    encoding = gen.optional(body, "encoding_format", str, default="float")
    if encoding not in ENCODINGS:
        raise InvalidRequest("encoding_format", f"must be one of {', '.join(ENCODINGS)}; got {encoding!r}")
    dimensions = gen.count(body, "dimensions")
    gen.optional(body, "user", str)
    return EmbeddingsRequest(model, tuple(value), encoding, dimensions, body)


def build_request(inputs: str | Sequence[str], model: str, **extra: Any) -> dict[str, Any]:
    """The body for `inputs`, checked by `parse_request` before anything is sent (None extras omitted)."""
    body = {"model": model, "input": inputs if isinstance(inputs, str) else list(inputs),
            **{k: v for k, v in extra.items() if v is not None}}
    parse_request(body)
    return body


def encode_vector(vector: Sequence[float], encoding: str) -> list[float] | str:
    """A vector as `encoding_format` asks: a list of floats, or base64 of little-endian float32."""
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return [float(x) for x in vector]


@dataclass(frozen=True, slots=True)
class EmbeddingsResult:
    """Vectors in input order (base64 already decoded), with the model and usage the gateway reported."""

    vectors: list[list[float]]
    model: str | None
    usage: dict[str, Any]
    request_id: str | None = None
    raw: Any = field(default=None, repr=False)

    @property
    def prompt_tokens(self) -> int | None:
        value = self.usage.get("prompt_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_response(data: Any, request_id: str | None = None) -> EmbeddingsResult:
    """Typed result of an embeddings body, ordered by each item's `index`; everything is kept in `raw`."""
    body = data if isinstance(data, Mapping) else {}
    items = [d for d in body.get("data") or () if isinstance(d, Mapping)]
    items.sort(key=lambda d: got if isinstance(got := d.get("index"), int) else 0)
    vectors = [_vector(d.get("embedding")) for d in items]
    usage = dict(body["usage"]) if isinstance(body.get("usage"), Mapping) else {}
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return EmbeddingsResult(vectors, model, usage, request_id, data)


def _vector(value: Any) -> list[float]:
    if isinstance(value, str):
        data = base64.b64decode(value)
        return list(struct.unpack(f"<{len(data) // 4}f", data))  # the client layer needs no numpy
    return [float(x) for x in value] if isinstance(value, list) else []
