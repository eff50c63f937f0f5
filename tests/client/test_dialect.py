"""The dialect: what gwlab sends to gateways that differ from the spec, and what it learns from them.

Pure functions are tested directly; the transport's behaviours use `httpx.MockTransport` only to
inject the answers a third-party server gives (the same behaviours are shown against the real servers
in tests/byo/test_byo_dialect.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gwlab import Dialect, errors
from gwlab.client import dialect
from gwlab.client.transport.core import normalize_base_url
from gwlab.local import decisions_openai as openai_shape
from gwlab.wire import decisions, decisions_openai
from tests.support.fakes import BASE_URL, CANARY_KEY, chat_body, sse_bytes, sse_response

QUESTIONS = {"billing": {"type": "noul", "instructions": "Is this about billing?"},
             "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "tech": "bugs"}},
             "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["later", "today"]}}
SYSTEM_ONE_ANSWER = {"model": "m", "answers": {"billing": {"type": "noul", "noul": 0.9}},
                     "usage": {"input_tokens": 5, "output_tokens": 0}}


@pytest.fixture(autouse=True)
def fresh_detection() -> Iterator[None]:
    """Detection is remembered per base URL for the process: each test starts from nothing."""
    dialect.forget()
    yield
    dialect.forget()


def recorder(answer: Any) -> tuple[list[httpx.Request], Any]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    return seen, handler


def sent(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content)


# --- the setting itself ------------------------------------------------------------------------------


def test_an_explicit_setting_wins_and_repr_shows_it_with_its_provenance(make_gateway):
    gw = make_gateway(lambda r: httpx.Response(200, json={}), dialect={"decisions_path": "/systemone"})
    assert gw.dialect.decisions_path == "/systemone"
    assert gw.dialect.source("decisions_path") == "explicit"
    assert gw.dialect.source("token_cap") == "default"
    assert "decisions_path='/systemone' (explicit)" in repr(gw)
    assert CANARY_KEY not in repr(gw)


def test_a_dialect_object_is_accepted_like_a_mapping(make_gateway):
    gw = make_gateway(lambda r: httpx.Response(200, json={}), dialect=Dialect(token_cap="max_tokens"))
    assert (gw.dialect.token_cap, gw.dialect.source("token_cap")) == ("max_tokens", "explicit")


def test_an_unknown_setting_or_value_is_refused_naming_it():
    with pytest.raises(errors.InvalidRequest) as unknown:
        Dialect.coerce({"decision_path": "/systemone"})
    assert unknown.value.field == "dialect.decision_path"
    with pytest.raises(errors.InvalidRequest) as bad:
        Dialect.coerce({"token_cap": "max_output_tokens"})
    assert bad.value.field == "dialect.token_cap"


# --- base_url -------------------------------------------------------------------------------------------


def test_a_base_url_with_systemone_after_v1_is_refused_pointing_at_the_dialect_option():
    with pytest.raises(errors.InvalidRequest) as refused:
        normalize_base_url("http://h:8000/v1/systemone")
    assert refused.value.field == "base_url"
    assert "http://h:8000/v1" in str(refused.value) and "decisions_path" in str(refused.value)


@pytest.mark.parametrize("url", ["http://h/v1/chat/completions", "http://h/api/v1/decisions/"])
def test_a_base_url_with_any_path_after_v1_is_refused_naming_base_url(url):
    with pytest.raises(errors.InvalidRequest) as refused:
        normalize_base_url(url)
    assert refused.value.field == "base_url" and "no path after it" in str(refused.value)


# --- the token cap --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [{"max_tokens": 6}, {"max_completion_tokens": 6}])
async def test_chat_sends_its_cap_under_both_names_with_one_value(make_gateway, cap):
    seen, handler = recorder(lambda r: httpx.Response(200, json=chat_body()))
    gw = make_gateway(handler)
    await gw.chat("hi", model="m", **cap)
    body = sent(seen[0])
    assert body["max_tokens"] == body["max_completion_tokens"] == 6


async def test_a_chat_stream_sends_its_cap_under_both_names_too(make_gateway):
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "length"}]}
    seen, handler = recorder(lambda r: sse_response([sse_bytes(chunk, "[DONE]")]))
    gw = make_gateway(handler)
    async with await gw.chat.stream("hi", model="m", max_tokens=2) as stream:
        async for _ in stream:
            pass
    assert sent(seen[0])["max_tokens"] == sent(seen[0])["max_completion_tokens"] == 2


async def test_two_different_caps_are_refused_naming_max_tokens(make_gateway):
    gw = make_gateway(lambda r: httpx.Response(200, json=chat_body()))
    with pytest.raises(errors.InvalidRequest) as refused:
        await gw.chat("hi", model="m", max_tokens=6, max_completion_tokens=8)
    assert refused.value.field == "max_tokens"


async def test_a_400_naming_one_cap_field_is_resent_without_it_and_remembered(make_gateway, caplog):
    def answer(request: httpx.Request) -> httpx.Response:
        if "max_completion_tokens" in sent(request):
            return httpx.Response(400, json={"error": {"message": "Unrecognized request argument supplied: "
                                                                  "max_completion_tokens", "param": None}})
        return httpx.Response(200, json=chat_body())

    seen, handler = recorder(answer)
    gw = make_gateway(handler)
    with caplog.at_level(logging.INFO, logger="gwlab"):
        await gw.chat("hi", model="m", max_tokens=6)
        await gw.chat("hi", model="m", max_tokens=6)
    assert [("max_completion_tokens" in sent(r), sent(r).get("max_tokens")) for r in seen] == [
        (True, 6), (False, 6), (False, 6)]
    assert gw.dialect.token_cap == "max_tokens"
    assert gw.dialect.source("token_cap").startswith("detected: POST /v1/chat/completions answered 400")
    assert sum("detected token_cap" in m for m in caplog.messages) == 1


# --- decisions: route and shape -------------------------------------------------------------------------


async def test_a_decisions_404_for_a_missing_route_tries_systemone_once_and_remembers(make_gateway):
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/decisions":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=SYSTEM_ONE_ANSWER)

    seen, handler = recorder(answer)
    gw = make_gateway(handler)
    first = await gw.decide("charged twice", QUESTIONS, model="m")
    await gw.decide("charged twice", QUESTIONS, model="m")
    assert first["billing"].noul == 0.9
    assert [r.url.path for r in seen] == ["/v1/decisions", "/v1/systemone", "/v1/systemone"]
    source = gw.dialect.source("decisions_path")
    assert source == ("detected: POST /v1/decisions answered 404 (no such route); /v1/systemone answered 200")
    assert "decisions_path='/systemone' (detected:" in repr(gw)


async def test_detection_is_shared_by_gateways_of_the_same_base_url(make_gateway):
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/decisions":
            return httpx.Response(404, text="<html>404 Not Found</html>", headers={"content-type": "text/html"})
        return httpx.Response(200, json=SYSTEM_ONE_ANSWER)

    seen, handler = recorder(answer)
    await make_gateway(handler).decide("x", QUESTIONS, model="m")
    other = make_gateway(handler, base_url=BASE_URL + "/")
    await other.decide("x", QUESTIONS, model="m")
    assert [r.url.path for r in seen] == ["/v1/decisions", "/v1/systemone", "/v1/systemone"]


async def test_an_explicit_decisions_path_is_never_redetected(make_gateway):
    seen, handler = recorder(lambda r: httpx.Response(404, json={"detail": "Not Found"}))
    gw = make_gateway(handler, dialect={"decisions_path": "/decisions"})
    with pytest.raises(errors.NotFound) as missing:
        await gw.decide("x", QUESTIONS, model="m")
    assert [r.url.path for r in seen] == ["/v1/decisions"]
    assert "no such route on this gateway" in str(missing.value)
    assert "decisions family" in str(missing.value) and "docs/guide/byo-gateway.md" in str(missing.value)


async def test_a_404_naming_a_model_is_not_rerouted_and_points_at_the_models(make_gateway):
    body = {"error": {"message": "The model 'nope' does not exist", "type": "invalid_request_error",
                      "param": "model", "code": "model_not_found"}}
    seen, handler = recorder(lambda r: httpx.Response(404, json=body))
    gw = make_gateway(handler)
    with pytest.raises(errors.NotFound) as missing:
        await gw.decide("x", QUESTIONS, model="nope")
    assert len(seen) == 1
    assert "no such model or resource" in str(missing.value) and "gw.models()" in str(missing.value)
    assert "no such route" not in str(missing.value)


async def test_models_in_typesafe_shape_send_decisions_to_systemone(make_gateway):
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"models": [{"id": "jev-latest"}]})
        return httpx.Response(200, json=SYSTEM_ONE_ANSWER)

    seen, handler = recorder(answer)
    gw = make_gateway(handler)
    await gw.models()
    await gw.decide("x", QUESTIONS, model="m")
    assert seen[-1].url.path == "/v1/systemone"
    assert "TypeSafe's shape" in gw.dialect.source("decisions_path")


async def test_systemone_refuses_a_question_without_instructions_before_sending(make_gateway):
    seen, handler = recorder(lambda r: httpx.Response(200, json=SYSTEM_ONE_ANSWER))
    gw = make_gateway(handler, dialect={"decisions_path": "/systemone"})
    bare = {"c": {"type": "choice", "criteria": {"a": None, "b": None}}}
    with pytest.raises(errors.InvalidRequest) as refused:
        await gw.decide("x", bare, model="m")
    assert refused.value.field == "questions.c.instructions"
    assert seen == []


async def test_a_400_naming_openai_input_is_answered_in_openai_shape_and_remembered(make_gateway):
    def answer(request: httpx.Request) -> httpx.Response:
        body = sent(request)
        if "state" in body:
            return httpx.Response(400, json={"error": {"message": "Invalid Decisions request: 2 validation errors "
                                                                  "for OpenAIDecisionRequestBody\ninput\n  Field "
                                                                  "required [type=missing]", "code": "400"}})
        names = [q["name"] for q in body["questions"]]
        return httpx.Response(200, json={"model": "m", "answers": [
            {"type": "predicate", "name": names[0], "probability": 0.8},
            {"type": "choice", "name": names[1], "choice": "tech", "confidence": 0.6,
             "probabilities": [{"value": "billing", "probability": 0.3}, {"value": "tech", "probability": 0.7}]},
            {"type": "refusal", "name": names[2]}], "usage": {"input_tokens": 7, "output_tokens": 0}})

    seen, handler = recorder(answer)
    gw = make_gateway(handler)
    result = await gw.decide("charged twice", QUESTIONS, model="m")
    await gw.decide("charged twice", QUESTIONS, model="m")
    assert (result["billing"].noul, result["team"].choice, result["team"].probabilities["tech"]) == (0.8, "tech", 0.7)
    assert result["urgency"].type == "refusal"
    assert ["state" in sent(r) for r in seen] == [True, False, False]
    assert gw.dialect.decisions_shape == "openai"
    assert "naming OpenAI's `input` field" in gw.dialect.source("decisions_shape")


def test_the_openai_translation_keeps_names_order_and_levels():
    body = decisions.build_request({"msg": "charged twice"}, QUESTIONS, "m")
    out = decisions_openai.to_openai_request(body)
    assert out["input"] == "msg: charged twice"
    assert [(q["type"], q["name"]) for q in out["questions"]] == [
        ("predicate", "billing"), ("choice", "team"), ("score", "urgency")]
    assert out["questions"][1]["choices"] == [{"value": "billing"}, {"value": "tech", "description": "bugs"}]
    assert out["questions"][2]["levels"] == [{"label": "later"}, {"label": "today"}]
    # the local gateway's own reader takes it back to the same System One questions
    back, _ = openai_shape.openai_to_system_one(out)
    assert back["questions"] == body["questions"]


# --- error bodies keep their field ---------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    {"error": {"message": "Field required", "field": "body.questions.c.choice.instructions"}},
    {"detail": [{"loc": ["body", "questions", "c", "choice", "instructions"], "msg": "Field required",
                 "type": "missing"}]},
])
async def test_a_422_names_the_field_in_its_message_and_attribute(make_gateway, body):
    gw = make_gateway(lambda r: httpx.Response(422, json=body), dialect={"decisions_path": "/systemone"})
    with pytest.raises(errors.BadRequest) as refused:
        await gw.decide("x", QUESTIONS, model="m")
    assert refused.value.field.endswith("questions.c.choice.instructions")
    assert refused.value.param == refused.value.field
    assert "questions.c.choice.instructions: Field required" in str(refused.value)


@pytest.mark.parametrize(("body", "missing"), [
    ({"detail": "Not Found"}, True), ({"error": {"message": "Not Found", "field": None}}, True), (None, True),
    ("<html><body>404</body></html>", True), ("404 page not found", True),
    ({"error": {"message": "model 'x' not found", "param": "model", "code": "model_not_found"}}, False),
    ({"error": {"message": "No video with id v1", "type": "invalid_request_error", "code": None}}, False),
])
def test_a_404_is_a_missing_route_only_when_its_body_says_nothing_more(body, missing):
    assert dialect.route_missing(body) is missing
