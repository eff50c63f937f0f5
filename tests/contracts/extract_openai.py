"""Cut the official OpenAI OpenAPI document down to the JSON Schemas gwlab's contract tests need.

Run: python tests/contracts/extract_openai.py PATH/TO/openapi.yaml COMMIT [OUT ROOT...]
(openapi.yaml, or openapi.json, from github.com/openai/openai-openapi; COMMIT is the upstream commit it
came from; reading YAML needs PyYAML, which the test extra brings).
Writes tests/contracts/openai/schemas.json: the reachable closure of ROOTS as Draft 2020-12 `$defs`,
with OpenAPI's `nullable: true` read as null-allowed, discriminators dropped (they have no mappings
and are not JSON Schema) and prose (descriptions, examples, x- extensions) removed to keep it small.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = ("CreateChatCompletionRequest", "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse",
         "CreateResponse", "Response", "ResponseStreamEvent", "ListModelsResponse", "ErrorResponse",
         "CreateEmbeddingRequest", "CreateEmbeddingResponse", "CreateBatchRequest", "Batch", "ListBatchesResponse",
         "OpenAIFile", "ListFilesResponse", "DeleteFileResponse")
OUT = Path(__file__).parent / "openai" / "schemas.json"
REF = "#/components/schemas/"
MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
LISTS = {"anyOf", "oneOf", "allOf", "prefixItems"}
ONE = {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
       "unevaluatedProperties", "unevaluatedItems"}
DROPPED = {"description", "example", "examples", "discriminator", "title", "nullable"}


def convert(node: Any, found: set[str]) -> Any:
    """One schema, rewritten; names of the component schemas it refers to are added to `found`."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED or key.startswith("x-"):
            continue
        if key == "$ref":
            name = value.removeprefix(REF)
            found.add(name)
            out[key] = f"#/$defs/{name}"
        elif key in MAPS:
            out[key] = {name: convert(sub, found) for name, sub in value.items()}
        elif key in LISTS:
            out[key] = [convert(sub, found) for sub in value]
        elif key in ONE:
            out[key] = convert(value, found)
        else:
            out[key] = value
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def closure(components: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """The converted schemas of `roots` and of everything they refer to, transitively."""
    done: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in done:
            continue
        found: set[str] = set()
        done[name] = convert(components[name], found)
        todo.extend(sorted(found - done.keys()))
    return dict(sorted(done.items()))


def stream_event_types(defs: dict[str, Any]) -> dict[str, str]:
    """Each responses stream event `type` value -> the schema that event must match."""
    types: dict[str, str] = {}
    for member in defs["ResponseStreamEvent"]["anyOf"]:
        name = member["$ref"].removeprefix("#/$defs/")
        for value in defs[name].get("properties", {}).get("type", {}).get("enum", []):
            types[value] = name
    return dict(sorted(types.items()))


def _load(source: Path) -> dict[str, Any]:
    if source.suffix == ".json":
        return json.loads(source.read_text())
    import yaml  # only here: the tests import this module, and need no YAML reader

    return yaml.safe_load(source.read_text())


def main(source: Path, commit: str, out: Path = OUT, roots: tuple[str, ...] = ROOTS) -> None:
    """OUT and ROOTS other than the defaults cut another bundle: `openai/batch_lines.json` holds the batch
    file lines (BatchRequestInput, BatchRequestOutput), which the document carried until its commit
    e1cb7a8 (June 2025); it is cut from that commit's parent, 498c71d."""
    document = _load(source)
    defs = closure(document["components"]["schemas"], roots)
    bundle = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$comment": f"from openai/openai-openapi openapi.yaml at {commit} (MIT, see LICENSE); "
                          "made by tests/contracts/extract_openai.py",
              "x-openapi-version": document["info"]["version"], "x-upstream-commit": commit,
              "x-roots": list(roots), "$defs": defs}
    if "ResponseStreamEvent" in defs:
        bundle["x-stream-events"] = stream_event_types(defs)
        bundle["$defs"] = bundle.pop("$defs")  # last, as before
    out.write_text(json.dumps(bundle, indent=1, sort_keys=False) + "\n")
    print(f"{out}: {len(defs)} schemas, {out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        main(Path(sys.argv[1]), sys.argv[2])
    elif len(sys.argv) > 4:
        main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), tuple(sys.argv[4:]))
    else:
        sys.exit("usage: extract_openai.py PATH/TO/openapi.yaml UPSTREAM_COMMIT [OUT ROOT...]")
