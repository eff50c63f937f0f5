"""The ledger's `ending` agrees for streamed and non-streamed answers of every family (issue 13 item 7).

The real embedded gateway, greedy (temperature=0) and a 3-token cap on a prompt that asks for a
long answer, so the cap is what ends each answer, every run. Before `ending`, a non-streamed
responses answer cut by `max_output_tokens` was recorded complete=True and the same answer streamed
complete=False, and chat and messages recorded a capped answer complete=True either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import gwlab
from tests.support.models import TEXT_MODEL

TEXT = TEXT_MODEL
LONG = "Q: Tell me a long story about a dragon who lived in a castle.\nA: Once upon a time"
CAP = 3

# family -> (create, stream), each asking greedily for at most CAP tokens
CALLS: dict[str, tuple[Any, Any]] = {
    "chat": (lambda gw: gw.chat(LONG, model=TEXT, max_completion_tokens=CAP, temperature=0),
             lambda gw: gw.chat.stream(LONG, model=TEXT, max_completion_tokens=CAP, temperature=0)),
    "responses": (lambda gw: gw.responses.create(LONG, model=TEXT, max_output_tokens=CAP, temperature=0),
                  lambda gw: gw.responses.stream(LONG, model=TEXT, max_output_tokens=CAP, temperature=0)),
    "messages": (lambda gw: gw.messages.create(LONG, model=TEXT, max_tokens=CAP, temperature=0),
                 lambda gw: gw.messages.stream(LONG, model=TEXT, max_tokens=CAP, temperature=0)),
}


@pytest.fixture(scope="module", params=["fast", "httpx"])  # both HTTP transports (client/transport/choice.py)
def sgw(gateway: Any, request: pytest.FixtureRequest) -> Iterator[gwlab.Gateway]:
    with gwlab.Gateway(gateway.base_url, gateway.api_key, http_transport=request.param) as client:
        yield client


@pytest.mark.parametrize("family", list(CALLS))
def test_a_capped_answer_is_recorded_capped_streamed_or_not(sgw: gwlab.Gateway, family: str) -> None:
    create, stream = CALLS[family]
    mark = len(sgw.ledger)
    whole = create(sgw)
    streamed = stream(sgw)
    streamed.collect()  # a capped stream ends properly: no StreamInterrupted
    assert whole.ending == streamed.ending == streamed.result.ending == "capped"
    assert not streamed.complete
    plain, live = sgw.ledger.entries()[mark:]
    assert (plain.streamed, live.streamed) == (False, True)
    assert (plain.ending, plain.complete) == (live.ending, live.complete) == ("capped", False)


def test_a_capped_response_says_so_in_the_ledger_frame(sgw: gwlab.Gateway) -> None:
    create, _ = CALLS["responses"]
    result = create(sgw)
    row = sgw.usage.iloc[-1]
    assert result.status == "incomplete" and result.incomplete_details["reason"] == "max_output_tokens"
    assert (row["ending"], bool(row["complete"]), row["path"]) == ("capped", False, "/responses")


def test_an_answer_the_model_ends_itself_is_complete(sgw: gwlab.Gateway) -> None:
    # a stop sequence the greedy answer reaches at once ends it as the model's own end (finish_reason stop)
    result = sgw.chat("Q: What is 2+2?\nA:", model=TEXT, max_completion_tokens=32, temperature=0, stop=[" "])
    assert result.finish_reason == "stop" and result.ending == "complete"
    row = sgw.ledger.entries()[-1]
    assert (row.ending, row.complete) == ("complete", True)
