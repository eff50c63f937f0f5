"""The contract tools themselves: the extractor's rewrites, the vendored bundle's closure, and that a
violation is reported naming the schema, the schema path and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.contracts.extract_openai import closure, convert
from tests.support.contracts import BUNDLE, anthropic_violations, bundle, event_violations, violations


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return own | {r for value in node.values() for r in _refs(value)}
    if isinstance(node, list):
        return {r for value in node for r in _refs(value)}
    return set()


def test_extractor_reads_nullable_as_null_allowed_and_drops_discriminators_and_prose() -> None:
    found: set[str] = set()
    schema = convert({"type": "object", "description": "prose", "x-oaiMeta": {}, "discriminator": {"propertyName": "t"},
                      "properties": {"description": {"type": "string", "nullable": True},
                                     "item": {"$ref": "#/components/schemas/Item"}}}, found)
    assert schema == {"type": "object", "properties": {
        "description": {"anyOf": [{"type": "string"}, {"type": "null"}]},  # a field named like a keyword stays
        "item": {"$ref": "#/$defs/Item"}}}
    assert found == {"Item"}


def test_extractor_keeps_only_the_reachable_closure_of_the_roots() -> None:
    components = {"A": {"$ref": "#/components/schemas/B"}, "B": {"type": "string"}, "C": {"type": "number"}}
    assert closure(components, ("A",)) == {"A": {"$ref": "#/$defs/B"}, "B": {"type": "string"}}


def test_vendored_bundle_is_self_contained_with_its_licence_and_upstream_commit() -> None:
    defs = bundle()["$defs"]
    assert {f"#/$defs/{name}" for name in defs} >= _refs(defs)
    assert set(bundle()["x-roots"]) <= defs.keys() and len(bundle()["x-upstream-commit"]) == 40
    assert "MIT License" in (BUNDLE.parent / "LICENSE").read_text()
    assert json.loads(Path(BUNDLE).read_text())["$comment"].startswith("from openai/openai-openapi")


def test_a_violation_names_the_schema_its_path_and_the_field() -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
             "system_fingerprint": None}
    assert violations(chunk, "CreateChatCompletionStreamResponse") == [
        "CreateChatCompletionStreamResponse at field $.system_fingerprint (schema properties/system_fingerprint/type):"
        " None is not of type 'string'"]


def test_a_violation_inside_a_union_names_the_branch_the_body_meant() -> None:
    body = {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": {}}]}
    assert violations(body, "CreateResponse") == [
        "CreateResponse at field $.tools[0] (schema allOf/1/properties/tools/items/oneOf/0/required): "
        "'strict' is a required property"]


def test_a_stream_event_of_no_official_type_fails() -> None:
    assert event_violations({"type": "response.made_up", "sequence_number": 0}) == [
        "<no official stream event of type 'response.made_up'>"]


def test_a_field_the_anthropic_sdk_does_not_know_is_reported() -> None:
    event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x", "extra": 1}}
    [found] = anthropic_violations(event, "RawMessageStreamEvent")
    assert "at field $.delta" in found and "'extra' was unexpected" in found
