"""Issue 13 items 1, 3, 4, 5, 6 and 8, each shown against a real third-party server (tests/byo/conftest.py).

gwlab is given only `base_url` and `api_key` and must find what it needs (client.dialect): the token-cap
field llama.cpp and LiteLLM read, laya-serve's /systemone route, LiteLLM's OpenAI-shape /decisions.
Generation is greedy (temperature 0); assertions are about caps, routes and fields, never wording.
"""

from __future__ import annotations

import httpx
import pandas as pd
import pytest

import gwlab
from gwlab import errors
from tests.support.servers import LITELLM_CHAT_MODEL, LITELLM_DECIDE_MODEL, RunningServer, connect

LIST = "Q: Name twenty animals, one per line.\nA:"  # greedy Gemma runs long: a cap must cut it
GREEDY = {"temperature": 0}
QUIET = {"checkpoint": False, "progress": False}
CAP = 6
QUESTIONS = {"billing": {"type": "noul", "instructions": "Is this about billing?"},
             "team": {"type": "choice", "instructions": "Which team should answer?",
                      "criteria": {"billing": "charges and refunds", "technical": "bugs and errors"}},
             "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["later", "today"]}}
STATE = "I was charged twice for my plan this month; please refund one charge."




# --- item 1: the token cap --------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", ["max_tokens", "max_completion_tokens"])
def test_llama_server_honours_either_cap_name(llama_server: RunningServer, cap: str) -> None:
    with connect(llama_server) as gw:
        result = gw.chat(LIST, model=llama_server.model, **{cap: CAP}, **GREEDY)
    assert result.finish_reason == "length" and result.usage.completion_tokens == CAP


@pytest.mark.parametrize("cap", ["max_tokens", "max_completion_tokens"])
def test_litellm_proxy_honours_either_cap_name(litellm_proxy: RunningServer, cap: str) -> None:
    with connect(litellm_proxy) as gw:
        result = gw.chat(LIST, model=LITELLM_CHAT_MODEL, **{cap: CAP}, **GREEDY)
    assert result.finish_reason == "length" and result.usage.completion_tokens <= CAP


@pytest.mark.parametrize("server_fixture", ["llama_server", "litellm_proxy"])
def test_df_gw_chat_max_tokens_caps_every_row(request: pytest.FixtureRequest, server_fixture: str) -> None:
    server: RunningServer = request.getfixturevalue(server_fixture)
    model = server.model if server_fixture == "llama_server" else LITELLM_CHAT_MODEL
    frame = pd.DataFrame({"fruit": ["banana", "cherry"]})
    with connect(server) as gw:
        out = frame.gw.chat("Q: Name twenty things as yellow as a {fruit}.\nA:", model=model, max_tokens=CAP,
                            params=GREEDY, **QUIET, gateway=gw)
    assert out["__output_tokens"].between(1, CAP).all(), out[["__status", "__output_tokens", "__error"]]


def test_df_gw_chat_params_that_collide_with_max_tokens_name_the_field(llama_server: RunningServer) -> None:
    frame = pd.DataFrame({"fruit": ["banana"]})
    with connect(llama_server) as gw, pytest.raises(errors.InvalidRequest) as refused:
        frame.gw.chat("Q: {fruit}?\nA:", model=llama_server.model, max_tokens=CAP, params={"max_tokens": CAP},
                      **QUIET, gateway=gw)
    assert refused.value.field == "params.max_tokens"


# --- items 3 and 4: decisions reach a System One server; base_url ends at /v1 -----------------------------


def test_decide_reaches_laya_serve_by_detecting_systemone(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw:
        result = gw.decide(STATE, QUESTIONS, model=laya_server.model)
        assert set(result.answers) == set(QUESTIONS) and 0 <= result["billing"].noul <= 1
        assert gw.dialect.decisions_path == "/systemone"
        assert gw.dialect.source("decisions_path") == (
            "detected: POST /v1/decisions answered 404 (no such route); /v1/systemone answered 200")
        assert "decisions_path='/systemone' (detected:" in repr(gw)
        assert laya_server.api_key not in repr(gw)
        paths = list(gw.usage["path"])
    assert paths == ["/systemone"]  # one call, recorded where it was answered


def test_models_in_typesafe_shape_send_decisions_straight_to_systemone(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw:
        gw.models()
        gw.decide(STATE, QUESTIONS, model=laya_server.model)
        assert list(gw.usage["path"]) == ["/models", "/systemone"]
        assert "TypeSafe's shape" in gw.dialect.source("decisions_path")


def test_df_gw_decide_with_an_explicit_dialect_reaches_laya_serve(laya_server: RunningServer) -> None:
    tickets = pd.DataFrame({"text": [STATE, "The app crashes when I open settings."]})
    with connect(laya_server, dialect={"decisions_path": "/systemone"}) as gw:
        out = tickets.gw.decide("{text}", QUESTIONS, model=laya_server.model, **QUIET, gateway=gw)
        assert gw.dialect.source("decisions_path") == "explicit"
        assert set(gw.usage["path"]) == {"/systemone"}
    assert out["billing__noul"].between(0, 1).all() and out["team__choice"].notna().all()


def test_a_base_url_ending_in_v1_systemone_is_refused_pointing_at_the_dialect(laya_server: RunningServer) -> None:
    with pytest.raises(errors.InvalidRequest) as refused:
        gwlab.connect(base_url=laya_server.base_url + "/systemone", api_key=laya_server.api_key)
    assert refused.value.field == "base_url"
    assert laya_server.base_url in str(refused.value) and "decisions_path" in str(refused.value)
    assert laya_server.api_key not in str(refused.value)


# --- item 5: a 404 says whether the route or the model is missing ------------------------------------------


def test_a_missing_route_on_llama_server_says_no_such_route_naming_the_family(llama_server: RunningServer) -> None:
    with connect(llama_server) as gw, pytest.raises(errors.NotFound) as missing:
        gw.responses.create(input="hi", model=llama_server.model, max_output_tokens=4)
    message = str(missing.value)
    assert "no such route on this gateway" in message and "responses family" in message
    assert "docs/guide/byo-gateway.md" in message and "gw.models()" not in message


def test_an_explicit_decisions_route_missing_on_laya_serve_says_no_such_route(laya_server: RunningServer) -> None:
    with connect(laya_server, dialect={"decisions_path": "/decisions"}) as gw, \
            pytest.raises(errors.NotFound) as missing:
        gw.decide(STATE, QUESTIONS, model=laya_server.model)
    assert "no such route on this gateway" in str(missing.value) and "decisions family" in str(missing.value)


def test_an_unknown_model_says_no_such_model(gateway) -> None:
    """The other kind of 404 comes from a route that ran: gwlab's own gateway names the model."""
    with gwlab.connect(base_url=gateway.base_url, api_key=gateway.api_key) as gw, \
            pytest.raises(errors.NotFound) as missing:
        gw.chat("hi", model="local/no-such-model", max_tokens=2)
    assert "no such model or resource" in str(missing.value) and "gw.models()" in str(missing.value)


# --- item 6: System One errors keep their field; instructions checked before sending --------------------


def test_laya_serve_422s_keep_their_field(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw:
        with pytest.raises(errors.BadRequest) as unknown_model:
            gw.decide(STATE, QUESTIONS, model="no-such-model")
        with pytest.raises(errors.BadRequest) as extra_field:
            gw.decide(STATE, QUESTIONS, model=laya_server.model, not_a_field=1)
    assert unknown_model.value.status == 422 and unknown_model.value.field == "model"
    assert extra_field.value.field == "body.not_a_field"
    assert "body.not_a_field: Extra inputs are not permitted" in str(extra_field.value)


def test_a_question_without_instructions_is_refused_before_it_reaches_laya_serve(laya_server: RunningServer
                                                                                  ) -> None:
    bare = {"c": {"type": "choice", "criteria": {"yes": None, "no": None}}}
    with connect(laya_server, dialect={"decisions_path": "/systemone"}) as gw:
        with pytest.raises(errors.InvalidRequest) as refused:
            gw.decide(STATE, bare, model=laya_server.model)
        assert len(gw.usage) == 0  # nothing was sent
    assert refused.value.field == "questions.c.instructions"
    # the server refuses the same body, naming the same question (so the local check matches it)
    raw = httpx.post(f"{laya_server.base_url}/systemone", json={"model": laya_server.model, "state": STATE,
                                                                "questions": bare},
                     headers={"Authorization": f"Bearer {laya_server.api_key}"}, timeout=30)
    assert raw.status_code == 422 and raw.json()["error"]["field"] == "body.questions.c.choice.instructions"


# --- item 8: LiteLLM's /v1/decisions speaks OpenAI's decisions shape -------------------------------------


def test_decide_through_litellm_translates_to_openai_shape_and_back(litellm_proxy: RunningServer) -> None:
    with connect(litellm_proxy) as gw:
        result = gw.decide(STATE, QUESTIONS, model=LITELLM_DECIDE_MODEL)
        again = gw.decide(STATE, QUESTIONS, model=LITELLM_DECIDE_MODEL)
        assert gw.dialect.decisions_shape == "openai"
        assert gw.dialect.source("decisions_shape") == ("detected: POST /v1/decisions refused the System One body "
                                                        "naming OpenAI's `input` field; OpenAI's shape answered 200")
        assert list(gw.usage["status"]) == [200, 200]  # the refused System One body was resent once, then remembered
    for answers in (result, again):
        assert 0 <= answers["billing"].noul <= 1
        assert answers["team"].choice in ("billing", "technical")
        assert set(answers["team"].probabilities) == {"billing", "technical"}
        assert 0 <= answers["urgency"].score <= 1 and answers["urgency"].legend == {"0": "later", "1": "today"}


def test_df_gw_decide_through_litellm_with_an_explicit_openai_shape(litellm_proxy: RunningServer) -> None:
    tickets = pd.DataFrame({"text": [STATE, "The app crashes when I open settings."]})
    with connect(litellm_proxy, dialect={"decisions_shape": "openai"}) as gw:
        out = tickets.gw.decide("{text}", QUESTIONS, model=LITELLM_DECIDE_MODEL, **QUIET, gateway=gw)
        assert list(gw.usage["status"]) == [200, 200]
    assert out["billing__noul"].between(0, 1).all() and out["team__choice"].isin(["billing", "technical"]).all()
