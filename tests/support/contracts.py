"""The vendored official schemas, and what a body breaks of them (imported by the contract tests).

openai/schemas.json is cut from the official OpenAI OpenAPI document by extract_openai.py (its
`$comment` names the upstream commit); docs/architecture.md "Contracts" says how to refresh it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from jsonschema.exceptions import ValidationError, best_match

BUNDLE = Path(__file__).resolve().parents[1] / "contracts" / "openai" / "schemas.json"
BATCH_LINES = BUNDLE.with_name("batch_lines.json")  # the batch file lines, from an older official document


@cache
def bundle(path: Path = BUNDLE) -> dict[str, Any]:
    return json.loads(path.read_text())


@cache
def _validator(name: str, path: Path = BUNDLE) -> jsonschema.Draft202012Validator:
    root = bundle(path)
    schema = {"$schema": root["$schema"], "$defs": root["$defs"], "$ref": f"#/$defs/{name}"}
    return jsonschema.Draft202012Validator(schema)


def violations(body: Any, name: str) -> list[str]:
    """Each way `body` breaks the official schema `name`: the field, the schema path and why."""
    return [_describe(_deepest(error), name) for error in _validator(name).iter_errors(body)]


def batch_line_violations(line: Any, name: str) -> list[str]:
    """Each way a batch file line breaks `BatchRequestInput` or `BatchRequestOutput` (batch_lines.json)."""
    return [_describe(_deepest(error), name) for error in _validator(name, BATCH_LINES).iter_errors(line)]


def _deepest(error: ValidationError) -> ValidationError:
    """Inside an anyOf/oneOf, the error of the branch the body was meant for: not one whose `type`
    tag or JSON type differs, and of those the one with the fewest errors (else jsonschema's pick)."""
    if not error.context:
        return error
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [errs for errs in branches.values() if not any(_wrong_kind(e, error) for e in errs)]
    if not meant:
        return best_match([error])
    return _deepest(min(meant, key=len)[0])


def _wrong_kind(sub: ValidationError, parent: ValidationError) -> bool:
    """The branch is for another kind of value: its `type` tag or JSON type differs from the body's."""
    same_place = list(sub.absolute_path) == list(parent.absolute_path)
    tag = list(sub.absolute_path) == [*parent.absolute_path, "type"] and sub.validator in ("const", "enum")
    return tag or (same_place and sub.validator == "type")


def _describe(error: ValidationError, name: str) -> str:
    where = "/".join(str(part) for part in error.absolute_schema_path)
    return f"{name} at field {error.json_path} (schema {where}): {error.message[:300]}"


def stream_event_schema(event: dict[str, Any]) -> str:
    """The schema a responses stream event must match, chosen by its `type` (unknown types fail)."""
    names = bundle()["x-stream-events"]
    return names.get(event.get("type"), f"<no official stream event of type {event.get('type')!r}>")


def event_violations(event: dict[str, Any]) -> list[str]:
    name = stream_event_schema(event)
    if name not in bundle()["$defs"]:
        return [name]
    return violations(event, name)


def sse_events(lines: Iterable[str]) -> Iterator[Any]:
    """The JSON payload of each `data:` line of an SSE body (the chat `[DONE]` marker is skipped)."""
    for line in lines:
        if line.startswith("data:"):
            data = line.removeprefix("data:").strip()
            if data != "[DONE]":
                yield json.loads(data)


def post_stream(url: str, key: str, body: dict[str, Any]) -> list[Any]:
    """Every event of one streamed answer, after checking it was a 200 event stream."""
    with httpx.stream("POST", url, json=body, timeout=180, headers={"Authorization": f"Bearer {key}"}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(r.iter_lines()))


class Recording(httpx.AsyncBaseTransport):
    """Passes every request to the real gateway and keeps (method, path, body) of each, and its headers."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[str, str, bytes]] = []
        self.headers: list[httpx.Headers] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path, await request.aread()))
        self.headers.append(request.headers)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


# --- messages: no official Anthropic OpenAPI document is public, so the schemas are derived from the typed
# models of the `anthropic` SDK installed here (pydantic models for answers, TypedDicts for requests), with
# every object closed (additionalProperties false) so a field the SDK does not know is reported too.
@cache
def _anthropic_validator(name: str) -> jsonschema.Draft202012Validator:
    from anthropic import types
    from anthropic.types import message_create_params as params
    from pydantic import TypeAdapter

    kinds = {"MessageCreateParamsNonStreaming": params.MessageCreateParamsNonStreaming,
             "MessageCreateParamsStreaming": params.MessageCreateParamsStreaming, "Message": types.Message,
             "RawMessageStreamEvent": types.RawMessageStreamEvent, "ErrorResponse": types.ErrorResponse,
             "MessageBatch": types.messages.MessageBatch,
             "MessageBatchIndividualResponse": types.messages.MessageBatchIndividualResponse}
    return jsonschema.Draft202012Validator(_closed(TypeAdapter(kinds[name]).json_schema()))


def _closed(node: Any) -> Any:
    """Every object schema with named properties refuses others (free-form dicts stay open)."""
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _closed(value) for key, value in node.items()}
    if isinstance(node.get("properties"), dict) and node.get("type", "object") == "object":
        out["additionalProperties"] = False
    return out


def anthropic_violations(body: Any, name: str) -> list[str]:
    """Each way `body` breaks the schema derived from the anthropic SDK's type `name`."""
    import anthropic

    label = f"anthropic {anthropic.__version__} {name}"
    return [_describe(_deepest(error), label) for error in _anthropic_validator(name).iter_errors(body)]
