"""A network cut is `interrupted`, never `capped` (issue 13 item 7), streamed or not, in every family.

The real gateway behind the fault proxy, which relays the first answer's status line and a few body
bytes, then drops the connection. Each request asks greedily for 3 tokens of a long answer: uncut,
every one of them would end `capped` (tests/client/test_endings_live.py), so the ledger must tell the
cap from the cut.
"""

from __future__ import annotations

from typing import Any

import pytest

from gwlab import errors
from gwlab.client.gateway import Gateway
from tests.support.fault_proxy import CutResponse, Exchange, Fault, FaultProxy, Pass
from tests.support.models import TEXT_MODEL

TEXT = TEXT_MODEL
LONG = "Q: Tell me a long story about a dragon who lived in a castle.\nA: Once upon a time"
CAPS = {"chat": {"max_completion_tokens": 3}, "responses": {"max_output_tokens": 3}, "messages": {"max_tokens": 3}}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def _cut_first(path: str) -> Any:
    """Cut the first answer on `path` after 60 body bytes: the status line arrived, the answer did not."""
    state = {"done": False}

    def script(exchange: Exchange) -> Fault:
        if exchange.path == path and not state["done"]:
            state["done"] = True
            return CutResponse(60)
        return Pass()

    return script


def _family(gw: Gateway, family: str) -> Any:
    return {"chat": gw.chat, "responses": gw.responses, "messages": gw.messages}[family]


@pytest.mark.parametrize("family", list(PATHS))
def test_a_stream_cut_by_the_network_is_interrupted_not_capped(gateway: Any, family: str) -> None:
    with FaultProxy(gateway.base_url, _cut_first(PATHS[family])) as proxy, \
            Gateway(proxy.base_url, gateway.api_key, max_retries=0) as gw:
        stream = _family(gw, family).stream(LONG, model=TEXT, temperature=0, allow_partial=True, **CAPS[family])
        stream.collect()
        [row] = gw.ledger.entries()
    assert (stream.ending, stream.complete, stream.status) == ("interrupted", False, "interrupted")
    assert (row.ending, row.complete, row.streamed, row.error) == ("interrupted", False, True, "StreamInterrupted")


@pytest.mark.parametrize("family", list(PATHS))
def test_a_whole_answer_cut_by_the_network_is_interrupted_not_capped(gateway: Any, family: str) -> None:
    with FaultProxy(gateway.base_url, _cut_first(PATHS[family])) as proxy, \
            Gateway(proxy.base_url, gateway.api_key, max_retries=0) as gw:
        with pytest.raises(errors.GatewayError):
            _family(gw, family).create(LONG, model=TEXT, temperature=0, **CAPS[family])
        [row] = gw.ledger.entries()
    assert (row.status, row.ending, row.complete, row.streamed) == (200, "interrupted", False, False)
