"""Structured output: one JSON Schema from a Pydantic model, a JSON Schema or a `{field: type}` mapping.

Pure (no I/O). `Schema.of` normalises every form to one strict-compatible schema (`additionalProperties:
false`, every property required, an optional field nullable so the model can answer null for "not in
the text"); `Schema.check` validates an answer and names each bad field. The wording sent to the model
(the schema in the prompt, the absent rule) is here too. How a family asks for it and reads it back is
its form (`wire/structured/forms.py`, on its row of wire/families.py); the re-ask is `wire/structured/driver.py`.
Pydantic is imported only when a model is given.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gwlab.errors import AnswerInvalid, InvalidRequest

__all__ = ["DEFAULT_MAX_REASKS", "AnswerInvalid", "Schema"]

DEFAULT_MAX_REASKS = 1  # an invalid answer is asked again once: small models rarely fix it in two

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
    dt.date: {"type": "string", "format": "date"}, dt.datetime: {"type": "string", "format": "date-time"},
}
_FIELD_KINDS = ("integer", "number", "boolean", "string")  # a top-level field's kinds besides date, enum, object
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True, slots=True)
class Schema:
    """A normalised JSON Schema of an object, and the Pydantic model it came from, if any."""

    json: dict[str, Any]
    name: str = "answer"
    model: Any = None  # a pydantic.BaseModel subclass

    @classmethod
    def of(cls, spec: Any, name: str | None = None) -> Schema:
        """Normalise a Pydantic model class, a JSON Schema (an object's) or a `{field: type}` mapping."""
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
            raw = spec.model_json_schema()
            return cls(_strict(_inline(raw, raw.get("$defs", {}))), name or spec.__name__, spec)
        if not isinstance(spec, Mapping) or not spec:
            raise InvalidRequest("schema", "a Pydantic model, a JSON Schema or a {field: type} mapping; got "
                                           f"{type(spec).__name__}")
        if spec.get("type") == "object" or "$schema" in spec:  # a JSON Schema, never a {field: type} mapping
            _require_properties(spec)
            _check_json_schema(spec)
            return cls(_strict(_inline(dict(spec), spec.get("$defs", {}))), name or "answer")
        properties = {str(field): _of_type(kind, f"schema.{field}") for field, kind in spec.items()}
        return cls(_strict({"type": "object", "properties": properties, "required": list(properties)}),
                   name or "answer")  # a mapping's field is optional only when its type says `| None`

    @property
    def fields(self) -> list[str]:
        return list(self.json["properties"])

    def kinds(self) -> dict[str, str]:
        """Per top-level field, what it holds, in JSON Schema's words: integer, number, boolean, string,
        date (a date or date-time string), enum (a string from a list) or object (lists, nested objects,
        and a field of several types). Which pandas dtype each becomes is the frames layer's
        (`gwlab.frames.extract.DTYPES`)."""
        out = {}
        for field, prop in self.json["properties"].items():
            found = _types_of(prop) - {"null"}
            kind = next(iter(found)) if len(found) == 1 else "object"
            if kind == "string" and prop.get("format") in ("date", "date-time"):
                out[field] = "date"
            elif _enum(prop) is not None and kind == "string":
                out[field] = "enum"
            else:
                out[field] = kind if kind in _FIELD_KINDS else "object"
        return out

    def categories(self, field: str) -> list[Any]:
        """The allowed values of an enum field, in the schema's order (null left out)."""
        return [v for v in _enum(self.json["properties"][field]) or [] if v is not None]

    def check(self, value: Any) -> list[str]:
        """Every way `value` breaks the schema, each naming its field; empty when valid."""
        import jsonschema

        validator = jsonschema.Draft202012Validator(self.json)
        problems = [f"{_path(error.absolute_path)}: {error.message}"
                    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path)))]
        if not problems and isinstance(value, Mapping):
            problems = [p for field, prop in self.json["properties"].items()
                        if (p := _bad_date(field, prop, value.get(field)))]
        return problems

    def parse(self, text: str | None) -> Any:
        """The validated answer of `text` (a Pydantic instance when a model was given, else a dict);
        AnswerInvalid naming every bad field otherwise."""
        if text is None or not text.strip():
            raise AnswerInvalid("the answer is empty: no JSON object", text)
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise AnswerInvalid(f"the answer is not valid JSON ({exc})", text) from None
        problems = self.check(value)
        if problems:
            raise AnswerInvalid("; ".join(problems), text)
        return self.model.model_validate(value) if self.model is not None else value

    def request_fields(self, form: Any) -> dict[str, Any]:
        """The request fields asking for JSON of this schema in a family's form (`StructuredForm`)."""
        if form is None:
            raise InvalidRequest("protocol", "this family has no structured-output form")
        return dict(form.request_fields(self))

    def sent(self) -> dict[str, Any]:
        """The schema as a gateway sees it: without gwlab's own keywords (`"x-grounding"`, which says a
        field is exempt from grounding or names its kind: gwlab/wire/grounding.py), which a strict
        validator may refuse."""
        sent: dict[str, Any] = _without(self.json, _OWN_KEYWORDS)  # a dict stays a dict
        return sent

    def instructions(self) -> str:
        """The prompt text asking for JSON when the gateway has no structured output (with `absent_rule`)."""
        ask = ("Answer with only a JSON object, no other text, matching this JSON Schema: "
               f"{json.dumps(self.sent(), separators=(',', ':'))}.")
        rule = self.absent_rule()
        return f"{ask} {rule}" if rule else ask

    def absent_rule(self) -> str | None:
        """The prompt text, sent natively too, that makes null the answer for an optional field the text does
        not state: a grammar alone lets a small model fill it with a guess. None when no field is optional."""
        optional = [f for f, prop in self.json["properties"].items() if "null" in _types_of(prop)]
        if not optional:
            return None
        return (f"If the text does not state {_listed(optional)}, answer null for it: never guess, infer or "
                "invent a value that is not written in the text.")


_OWN_KEYWORDS = ("x-grounding",)


def _without(node: Any, keys: Sequence[str]) -> Any:
    """`node` without the keywords `keys` (a boolean or a string) anywhere in the tree (a property so named is
    an object: kept)."""
    if isinstance(node, Mapping):
        return {k: _without(v, keys) for k, v in node.items() if not (k in keys and isinstance(v, bool | str))}
    if isinstance(node, list):
        return [_without(v, keys) for v in node]
    return node


def _of_type(kind: Any, field: str) -> dict[str, Any]:
    """The JSON Schema of one Python type of a `{field: type}` mapping."""
    if isinstance(kind, type) and kind in _SCALARS:
        return dict(_SCALARS[kind])
    if isinstance(kind, list | tuple):
        values = list(kind)
        types_ = {type(v) for v in values}
        if not values or len(types_) != 1 or next(iter(types_)) not in _JSON_TYPES:
            raise InvalidRequest(field, f"a list of allowed values of one type (str, int, float, bool); got {kind!r}")
        return {"type": _JSON_TYPES[next(iter(types_))], "enum": values}
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _nullable(_of_type(rest[0], field))
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _of_type(args[0], field + "[]")}
    if origin is typing.Literal:
        return _of_type(list(args), field)
    raise InvalidRequest(field, "str, int, float, bool, datetime.date, datetime.datetime, a list of allowed values, "
                                f"T | None or list[T]; got {kind!r}")


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` that also allows null (a type list for a scalar, anyOf otherwise)."""
    if "null" in _types_of(prop):
        return prop
    if isinstance(prop.get("type"), str) and prop["type"] not in ("object", "array"):
        out = {**prop, "type": [prop["type"], "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [prop, {"type": "null"}]}


def _strict(node: Mapping[str, Any]) -> dict[str, Any]:
    """Every object closed and every property required; a property that was optional becomes nullable."""
    node = dict(node)
    for key in ("anyOf", "oneOf"):
        if key in node:
            node[key] = [_strict(sub) for sub in node[key]]
    if "items" in node and isinstance(node["items"], Mapping):
        node["items"] = _strict(node["items"])
    if isinstance(node.get("properties"), Mapping):
        required = set(node.get("required", []))
        node["properties"] = {name: _strict(prop) if name in required else _nullable(_strict(prop))
                              for name, prop in node["properties"].items()}
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
        node.setdefault("type", "object")
    for key in ("default", "title", "$defs", "definitions"):
        node.pop(key, None)
    return node


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """`$ref`s to `#/$defs/...` replaced by their definitions (strict modes and grammars want one tree)."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.split("/")[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _require_properties(spec: Mapping[str, Any]) -> None:
    """An object's JSON Schema names its fields under `properties`: a typo ("proprties") is named, not
    read as a field called "type" of a `{field: type}` mapping."""
    if isinstance(spec.get("properties"), Mapping):
        return
    near = difflib.get_close_matches("properties", [str(k) for k in spec], n=1, cutoff=0.7)
    if near and near[0] != "properties":
        raise InvalidRequest(f"schema.{near[0]}", "not a JSON Schema keyword; did you mean 'properties'? (an "
                                                  "object's schema lists its fields under 'properties')")
    raise InvalidRequest("schema.properties", "a JSON Schema of an object lists its fields under 'properties' "
                                              "(a mapping of field -> schema); this one has none")


def _check_json_schema(spec: Mapping[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(spec)
    except jsonschema.SchemaError as exc:
        raise InvalidRequest(f"schema.{_path(exc.absolute_path)}", exc.message) from None


def _types_of(prop: Mapping[str, Any]) -> set[str]:
    kind = prop.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return set(kind)
    found: set[str] = set()
    for sub in prop.get("anyOf", []) + prop.get("oneOf", []):
        found |= _types_of(sub)
    if not found and "enum" in prop:
        found = {_JSON_TYPES.get(type(v), "null") for v in prop["enum"]}
    return found


def _enum(prop: Mapping[str, Any]) -> list[Any] | None:
    if "enum" in prop:
        return list(prop["enum"])
    return next((list(sub["enum"]) for sub in prop.get("anyOf", []) if "enum" in sub), None)


def _bad_date(field: str, prop: Mapping[str, Any], value: Any) -> str | None:
    fmt = prop.get("format") or next((s.get("format") for s in prop.get("anyOf", []) if s.get("format")), None)
    if fmt not in ("date", "date-time") or not isinstance(value, str):
        return None
    try:
        (dt.date if fmt == "date" else dt.datetime).fromisoformat(value)
    except ValueError:
        return f"{field}: {value!r} is not an ISO {fmt}"
    return None


def _listed(fields: Sequence[str]) -> str:
    """`a`, `a or b`, `a, b or c`: the optional fields as the absent rule names them."""
    return fields[0] if len(fields) == 1 else f"{', '.join(fields[:-1])} or {fields[-1]}"


def _path(parts: Any) -> str:
    text = ".".join(str(p) for p in parts)
    return text or "(the answer)"
