"""`schema=` on gw.chat, gw.responses.create and gw.messages.create (sync and async): `.parsed` is the
validated answer; an invalid one is re-asked with its error, then refused (issue 24 point 4). Against
the loopback stub of tests/extractkit.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

import gwlab
from gwlab.errors import InvalidRequest
from gwlab.wire.schema import AnswerInvalid
from tests.support.extract import GOOD, KEY, REQUESTS, SCHEMA, stub_server

pydantic = pytest.importorskip("pydantic")  # optional: only needed when a model class is the schema


class Ticket(pydantic.BaseModel):
    product: str
    order: int | None = None
    sentiment: str


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with stub_server() as base:
        yield base


def _call(gw, protocol, prompt, **kw):
    if protocol == "chat":
        return gw.chat(prompt, model="m", **kw)
    if protocol == "responses":
        return gw.responses.create(prompt, model="m", **kw)
    return gw.messages.create(prompt, model="m", max_tokens=64, **kw)


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_single_call_with_a_schema_carries_the_parsed_answer(url, protocol):
    REQUESTS.clear()
    with gwlab.Gateway(url, KEY) as gw:
        as_dict = _call(gw, protocol, "good", schema=SCHEMA)
        as_model = _call(gw, protocol, "good", schema=Ticket)
    assert as_dict.parsed == GOOD
    assert isinstance(as_model.parsed, Ticket) and as_model.parsed.order == 42
    assert len(REQUESTS) == 2


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_single_call_tells_the_model_to_answer_null_for_an_optional_field_the_text_omits(url, protocol):
    REQUESTS.clear()
    with gwlab.Gateway(url, KEY) as gw:
        _call(gw, protocol, "good", schema=SCHEMA)
        _call(gw, protocol, [{"role": "user", "content": [{"type": "text", "text": "good"}]}], schema=SCHEMA)
        _call(gw, protocol, "good", schema={**SCHEMA, "order": int})  # no optional field: no rule
    texts = [json.dumps(body) for body in REQUESTS]
    assert all("answer null for it" in text and "order" in text for text in texts[:2])
    assert "answer null" not in texts[2]


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_single_call_reasks_an_invalid_answer_once_then_parses(url, protocol):
    REQUESTS.clear()
    with gwlab.Gateway(url, KEY) as gw:
        reply = _call(gw, protocol, "fix-wrongtype", schema=SCHEMA)
    assert reply.parsed == GOOD and len(REQUESTS) == 2


def test_a_single_call_still_invalid_after_its_reasks_raises_naming_the_error_with_the_reply(url):
    REQUESTS.clear()
    with gwlab.Gateway(url, KEY) as gw, pytest.raises(AnswerInvalid, match="not valid JSON") as info:
        gw.chat("never", model="m", schema=SCHEMA, max_reasks=2)
    assert len(REQUESTS) == 3 and info.value.reply.text == info.value.raw


def test_the_async_twin_takes_a_schema_too(url):
    async def go():
        async with gwlab.AsyncGateway(url, KEY) as gw:
            return await gw.messages.create("good", model="m", max_tokens=64, schema=Ticket)

    assert asyncio.run(go()).parsed.product == "kettle"


def test_a_structured_field_given_beside_schema_is_refused_naming_it(url):
    with gwlab.Gateway(url, KEY) as gw, pytest.raises(InvalidRequest) as info:
        gw.chat("good", model="m", schema=SCHEMA, response_format={"type": "json_object"})
    assert info.value.field == "response_format"


def test_without_a_schema_parsed_is_none(url):
    with gwlab.Gateway(url, KEY) as gw:
        assert gw.chat("good", model="m").parsed is None
