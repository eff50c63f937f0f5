"""The schema layer (gwlab/wire/schema.py): every schema form normalised to one strict JSON Schema,
answers validated with each bad field named, and each family's native request form."""

from __future__ import annotations

import datetime as dt

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.families import FAMILIES, TEXT
from gwlab.wire.schema import AnswerInvalid, Schema

pydantic = pytest.importorskip("pydantic")  # optional: only needed when a model class is the schema

MAPPING = {"product": str, "order": int | None, "price": float, "refund": bool,
           "sentiment": ["positive", "neutral", "negative"], "when": dt.date, "at": dt.datetime | None,
           "tags": list[str]}


class Ticket(pydantic.BaseModel):
    product: str
    order: int | None = None
    sentiment: str


def test_a_mapping_becomes_a_closed_schema_with_every_field_required_and_optionals_nullable():
    schema = Schema.of(MAPPING)
    assert schema.json["additionalProperties"] is False
    assert schema.json["required"] == list(MAPPING)
    assert schema.json["properties"]["order"]["type"] == ["integer", "null"]
    assert schema.json["properties"]["product"]["type"] == "string"
    assert schema.json["properties"]["sentiment"]["enum"] == ["positive", "neutral", "negative"]


def test_each_mapping_type_has_its_kind_in_json_schema_s_words():
    assert Schema.of(MAPPING).kinds() == {
        "product": "string", "order": "integer", "price": "number", "refund": "boolean", "sentiment": "enum",
        "when": "date", "at": "date", "tags": "object"}


def test_a_pydantic_model_keeps_its_class_and_its_optional_field_becomes_nullable_and_required():
    schema = Schema.of(Ticket)
    assert schema.model is Ticket and schema.name == "Ticket"
    assert schema.json["required"] == ["product", "order", "sentiment"]
    assert "null" in {s.get("type") for s in schema.json["properties"]["order"]["anyOf"]}
    parsed = schema.parse('{"product": "kettle", "order": null, "sentiment": "negative"}')
    assert isinstance(parsed, Ticket) and parsed.order is None


def test_a_json_schema_with_an_optional_property_is_made_strict():
    schema = Schema.of({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                        "required": ["a"]})
    assert schema.json["required"] == ["a", "b"] and schema.json["properties"]["b"]["type"] == ["integer", "null"]


def test_a_nested_object_is_closed_too_and_read_as_one_object_column():
    schema = Schema.of({"type": "object", "properties": {"who": {"type": "object", "properties": {
        "name": {"type": "string"}}}}, "required": ["who"]})
    assert schema.json["properties"]["who"]["additionalProperties"] is False
    assert schema.kinds() == {"who": "object"}


@pytest.mark.parametrize("spec, field", [({"x": complex}, "schema.x"), ({"x": [1, "a"]}, "schema.x"),
                                         ({"type": "object", "properties": {"x": {"type": 3}}},
                                          "schema.properties.x.type"),
                                         ("nope", "schema")])
def test_a_bad_schema_is_refused_naming_the_field(spec, field):
    with pytest.raises(InvalidRequest) as info:
        Schema.of(spec)
    assert info.value.field == field


@pytest.mark.parametrize("text, words", [
    ("not json", ["not valid JSON"]),
    ('{"product": "a"}', ["'order' is a required property"]),
    ('{"product": "a", "order": 1.5}', ["order: 1.5 is not of type"]),
    ('{"product": "a", "order": 1, "extra": 2}', ["Additional properties", "'extra'"]),
    ("", ["empty"]),
])
def test_an_invalid_answer_names_what_is_wrong(text, words):
    schema = Schema.of({"product": str, "order": int})
    with pytest.raises(AnswerInvalid) as info:
        schema.parse(text)
    assert all(w in str(info.value) for w in words) and info.value.raw == text


def test_an_unknown_category_and_a_bad_date_are_errors_not_guesses():
    schema = Schema.of({"s": ["a", "b"], "d": dt.date})
    assert schema.check({"s": "c", "d": "2024-01-02"}) == ["s: 'c' is not one of ['a', 'b']"]
    assert schema.check({"s": "a", "d": "yesterday"}) == ["d: 'yesterday' is not an ISO date"]


def test_each_text_family_asks_in_its_documented_form():
    schema = Schema.of({"a": str}, name="row")
    forms = {name: schema.request_fields(FAMILIES[name].structured_output) for name in TEXT}
    assert forms["chat"] == {"response_format": {"type": "json_schema", "json_schema": {
        "name": "row", "schema": schema.json, "strict": True}}}
    assert forms["responses"] == {"text": {"format": {"type": "json_schema", "name": "row", "schema": schema.json,
                                                      "strict": True}}}
    assert forms["messages"]["tool_choice"] == {"type": "tool", "name": "row"}
    assert forms["messages"]["tools"][0]["input_schema"] == schema.json
