"""Structured output from the local text models is valid JSON every time, not only usually.

A string asked to hold several lines used to come back with raw newlines in it (invalid JSON): the grammar
llama.cpp builds from a JSON schema let any character but `"` and `\\` into a string.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema
import pytest

from gwlab.local.engines.llama import json_grammar
from gwlab.local.textgen import STRING_CAP, enforced, generation_schema

pytest.importorskip("llama_cpp")

POEM = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 80}}, "required": ["x"],
        "additionalProperties": False}
ASK = "Write a poem with several short lines, one per line, into field x."
SEEDS = (1, 2, 3, 4)
# every structured-output form a local text model answers: chat json_schema and json_object, responses
FORMS = ("chat json_schema", "chat json_object", "responses json_schema")
CONTROL = re.compile(r"[\x00-\x1f]")

# one GBNF terminal: a quoted literal or a (possibly negated) character class, with their escapes
_TERMINAL = re.compile(r'"((?:\\.|[^"\\])*)"|\[(\^?)((?:\\.|[^\]\\])*)\]')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")
_NAMED = {"n": "\n", "r": "\r", "t": "\t"}


def _chars(text: str) -> list[str]:
    """The characters a GBNF literal or class body stands for, escapes decoded."""
    out, i = [], 0
    while i < len(text):
        m = _ESCAPE.match(text, i)
        if m:
            e = m.group(1)
            out.append(chr(int(e[1:], 16)) if len(e) > 1 else _NAMED.get(e, e))
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return out


def _admits(negated: bool, body: str, char: str) -> bool:
    """Whether a GBNF character class `[body]` (`[^body]` when negated) matches `char`."""
    chars, hit, i = _chars(body), False, 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            hit |= chars[i] <= char <= chars[i + 2]
            i += 3
        else:
            hit |= chars[i] == char
            i += 1
    return hit != negated


def _raw_controls(grammar: str) -> set[str]:
    """Control characters some terminal of `grammar` can emit (each rule's right side only)."""
    found: set[str] = set()
    for line in grammar.splitlines():
        for m in _TERMINAL.finditer(line.partition("::=")[2]):
            if m.group(1) is not None:
                found |= {c for c in _chars(m.group(1)) if CONTROL.match(c)}
            else:
                found |= {chr(c) for c in range(32) if _admits(m.group(2) == "^", m.group(3), chr(c))}
    return found


@pytest.mark.parametrize("schema", [
    {"type": "object"},  # what chat json_object asks for
    POEM,
    {"type": "object", "properties": {"x": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^a.[^x]+$"}}},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^a\\nb[\\t x]c$"}}},
], ids=["json_object", "poem", "strings_and_arrays", "free_keys", "pattern", "pattern_with_controls"])
def test_the_json_grammar_cannot_emit_a_raw_control_character(schema: dict[str, Any]) -> None:
    grammar = json_grammar(generation_schema(schema))
    assert _raw_controls(grammar) == set(), grammar
    if "char ::=" in grammar:  # a free string: the escaped forms (\n) are still allowed
        assert '"\\\\" (["\\\\/bfnrt]' in grammar


def test_the_raw_control_check_sees_what_the_unfixed_grammar_allowed() -> None:
    """The checker itself: the class llama.cpp writes for a string character admits a raw newline."""
    assert "\n" in _raw_controls('char ::= [^"\\\\] | "\\\\" (["\\\\/bfnrt])')
    assert _raw_controls('char ::= [^"\\\\\\x00-\\x1F]') == set()


def _ask(gateway: Any, form: str, seed: int) -> tuple[str, str]:
    """(answer text, finish) for one sampled structured-output request of the given form."""
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    common = {"model": "local/gemma-3-270m", "temperature": 1.0, "seed": seed}
    if form.startswith("chat"):
        fmt = ({"type": "json_object"} if form.endswith("json_object") else
               {"type": "json_schema", "json_schema": {"name": "poem", "schema": POEM}})
        body = {**common, "max_tokens": 60, "response_format": fmt, "messages": [{"role": "user", "content": ASK}]}
        r = httpx.post(f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=300)
        r.raise_for_status()
        choice = r.json()["choices"][0]
        return choice["message"]["content"], choice["finish_reason"]
    body = {**common, "max_output_tokens": 60, "input": ASK,
            "text": {"format": {"type": "json_schema", "name": "poem", "schema": POEM}}}
    r = httpx.post(f"{gateway.base_url}/responses", json=body, headers=headers, timeout=300)
    r.raise_for_status()
    data = r.json()
    text = "".join(c["text"] for item in data["output"] if item["type"] == "message" for c in item["content"])
    return text, "stop" if data["status"] == "completed" else "length"


@pytest.mark.parametrize("form", FORMS)
def test_sampled_multiline_answers_always_parse_and_validate(gateway: Any, form: str) -> None:
    """Several seeds at temperature 1 with a prompt that invites line breaks: every answer that ended by
    itself parses (and validates against the schema); a capped one still holds no raw control character."""
    for seed in SEEDS:
        text, finish = _ask(gateway, form, seed)
        assert not CONTROL.search(text), (seed, text)
        if finish == "stop":
            value = json.loads(text)
            jsonschema.validate(value, {"type": "object"} if form.endswith("json_object") else POEM)


LINES = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^a\\nb[\\t ]c$"}},
         "required": ["code"], "additionalProperties": False}


def test_a_pattern_that_asks_for_a_line_break_gets_it_escaped_and_the_answer_validates(gateway: Any) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "lines", "schema": LINES}}
    body = {"model": "local/gemma-3-270m", "max_tokens": 24, "temperature": 1.0, "seed": 1, "response_format": fmt,
            "messages": [{"role": "user", "content": "Give the code."}]}
    r = httpx.post(f"{gateway.base_url}/chat/completions", json=body, timeout=300,
                   headers={"Authorization": f"Bearer {gateway.api_key}"})
    r.raise_for_status()
    text = r.json()["choices"][0]["message"]["content"]
    assert not CONTROL.search(text), text
    value = json.loads(text)
    jsonschema.validate(value, LINES)
    assert value["code"] in ("a\nb\tc", "a\nb c")


def test_a_nullable_enum_and_string_are_forced_and_capped_by_the_grammar() -> None:
    """`T | None` as strict mode writes it (a type list) kept its enum out of the grammar: the model wrote
    other values and the local gateway answered 500 after its attempts."""
    nullable = {"type": "object", "additionalProperties": False, "required": ["product", "note"], "properties": {
        "product": {"type": ["string", "null"], "enum": ["kettle", "laptop", None]},
        "note": {"type": ["string", "null"]}}}
    tightened = generation_schema(nullable)
    assert enforced(tightened)
    product = tightened["properties"]["product"]["anyOf"]
    assert {"type": "string", "enum": ["kettle", "laptop"]} in product and {"type": "null", "enum": [None]} in product
    assert {"type": "string", "maxLength": STRING_CAP} in tightened["properties"]["note"]["anyOf"]
    grammar = json_grammar(tightened)
    assert '"\\"kettle\\"" | "\\"laptop\\""' in grammar
