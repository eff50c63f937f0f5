"""gwlab against laya-serve 0.2.1 (TypeSafe System One at /v1/systemone, fake backend): a server gwlab did not write.

It offers models (TypeSafe's `{"models": [...]}` shape) and decisions; it has no chat, responses or messages
routes. Every call goes through gwlab's public API with only `base_url` and `api_key`: gwlab must find the
/systemone route itself. Where typesafe-sdk, the vendor's own client, behaves differently on the same server
(a 429), a test shows both.
"""

from __future__ import annotations

import pandas as pd
import pytest
import typesafe_sdk as ts

import gwlab
from gwlab import errors
from tests.support import servers
from tests.support.servers import RunningServer, connect

STATE = "I was charged twice for my plan this month; please refund one charge."
QUESTIONS = {"billing": {"type": "noul", "instructions": "Is this about billing?"},
             "team": {"type": "choice", "instructions": "Which team should answer?",
                      "criteria": {"billing": "charges and refunds", "technical": "bugs and errors"}},
             "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["later", "today"]}}
QUIET = {"checkpoint": None, "progress": False}




def test_models_reads_typesafe_s_listing_shape(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw:
        assert laya_server.model in gw.models()


def test_decide_finds_the_systemone_route_and_answers_every_question(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw:
        result = gw.decide(STATE, QUESTIONS, model=laya_server.model)
        row = gw.ledger.entries()[-1]
    assert set(result.answers) == set(QUESTIONS)
    assert 0.0 <= result.answers["billing"].noul <= 1.0
    assert result.answers["team"].choice in ("billing", "technical")
    assert row.path.endswith("/systemone") and row.status == 200


def test_df_gw_decide_sends_each_row_to_systemone_and_gets_columns(laya_server: RunningServer) -> None:
    tickets = pd.DataFrame({"text": [STATE, "The app crashes when I open settings.", "Thanks, all good now."]})
    with connect(laya_server) as gw:
        out = tickets.gw.decide("{text}", QUESTIONS, model=laya_server.model, gateway=gw, **QUIET)
    assert list(out["__status"]) == ["sent"] * 3
    assert out["billing__noul"].between(0, 1).all() and out["team__choice"].isin(["billing", "technical"]).all()


def test_a_bad_key_is_authentication_failed_and_the_key_is_not_in_the_message(laya_server: RunningServer
                                                                               ) -> None:
    with gwlab.connect(base_url=laya_server.base_url, api_key="sk-not-the-key") as gw, \
            pytest.raises(errors.AuthenticationFailed) as caught:
        gw.decide(STATE, QUESTIONS, model=laya_server.model)
    assert caught.value.status == 401 and "sk-not-the-key" not in str(caught.value)


def test_an_unknown_model_is_refused_naming_the_model(laya_server: RunningServer) -> None:
    with connect(laya_server) as gw, pytest.raises(errors.StatusError) as caught:
        gw.decide(STATE, QUESTIONS, model="no-such-model")
    assert caught.value.status in (400, 404, 422) and "no-such-model" in str(caught.value)


@pytest.mark.parametrize("family", ["chat", "responses", "messages"])
def test_a_family_the_server_lacks_is_a_404_that_says_the_route_is_missing(laya_server: RunningServer,
                                                                           family: str) -> None:
    with connect(laya_server) as gw:
        calls = {
            "chat": lambda: gw.chat("Hello", model=laya_server.model, max_completion_tokens=4),
            "responses": lambda: gw.responses.create("Hello", model=laya_server.model, max_output_tokens=4),
            "messages": lambda: gw.messages.create("Hello", model=laya_server.model, max_tokens=4),
        }
        with pytest.raises(errors.NotFound) as caught:
            calls[family]()
    message = str(caught.value)
    assert "no such route on this gateway" in message and "check the model ID" not in message


def test_a_killed_server_is_a_connection_failure_and_a_batch_reports_no_row_as_answered(
        laya_server_to_kill: RunningServer) -> None:
    server = laya_server_to_kill
    tickets = pd.DataFrame({"text": [STATE, "The app crashes."]})
    with connect(server, max_retries=0) as gw:
        assert set(gw.decide(STATE, QUESTIONS, model=server.model).answers) == set(QUESTIONS)
        servers.kill(server)
        with pytest.raises(errors.ConnectionFailed):
            gw.decide(STATE, QUESTIONS, model=server.model)
        out = tickets.gw.decide("{text}", QUESTIONS, model=server.model, gateway=gw, errors="coerce", **QUIET)
    assert list(out["__status"]) == ["error"] * 2 and out["billing__noul"].isna().all()


def test_a_429_is_rate_limited_with_retry_after_where_typesafe_sdk_raises_its_own(
        laya_server_rate_limited: RunningServer) -> None:
    """laya-serve at 2 requests a minute: the third is a 429 with Retry-After. gwlab (retries off) raises
    RateLimited carrying `retry_after` in seconds; typesafe-sdk raises TypeSafeRateLimitError, which has no
    retry_after: its caller must read the header (docs/guide/byo-gateway.md)."""
    server = laya_server_rate_limited
    with connect(server, max_retries=0) as gw:
        for _ in range(2):
            gw.decide(STATE, QUESTIONS, model=server.model)
        with pytest.raises(errors.RateLimited) as caught:
            gw.decide(STATE, QUESTIONS, model=server.model)
    assert caught.value.status == 429 and caught.value.retry_after and caught.value.retry_after > 0
    with ts.TypeSafeClient(api_key=server.api_key, base_url=server.root, model=server.model,
                           retry=ts.RetryPolicy(max_retries=0)) as sdk, \
            pytest.raises(ts.TypeSafeRateLimitError) as sdk_caught:
        sdk.system_one(state=STATE, questions={"billing": ts.Noul(instructions="Is this about billing?")})
    assert not hasattr(sdk_caught.value, "retry_after") and "429" in str(sdk_caught.value)
    assert server.api_key not in str(caught.value) + str(sdk_caught.value)
