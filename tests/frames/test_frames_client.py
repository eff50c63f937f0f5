"""The frames layer's door to the client (gwlab/frames/_client.py): a run retries by the client
transport's own policy. Faults are injected through httpx.MockTransport under a real Gateway."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway
from gwlab.errors import ConnectionFailed, RateLimited
from gwlab.wire import limits
from tests.support.tickets import QUESTIONS, tickets_frame

KEY = "sk-frames-client-test"


class Always:
    """Answers every request with one response (or raises `error`); counts the requests."""

    def __init__(self, status: int, body: dict, **headers: str) -> None:
        self.status, self.body, self.headers = status, body, headers
        self.requests: list[httpx.Request] = []
        self.error: Exception | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return httpx.Response(self.status, json=self.body, headers=self.headers)


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BACKOFF_BASE_SECONDS", 0.001)


@pytest.fixture
def gateway_for() -> Iterator:
    made: list[Gateway] = []

    def make(handler: Always) -> Gateway:
        gateway = Gateway("http://gateway.test/v1", api_key=KEY, http_transport=httpx.MockTransport(handler))
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.close()


def decide(gateway: Gateway) -> pd.DataFrame:
    frame = tickets_frame().head(1)
    return frame.gw.decide("{ticket}", QUESTIONS, gateway=gateway, checkpoint=None, progress=False,
                           concurrency=1)


def test_a_run_does_not_retry_a_429_whose_error_type_says_the_quota_is_exhausted(gateway_for, fast_backoff):
    quota = Always(429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                   "code": None}}, **{"retry-after": "0"})
    with pytest.raises(RateLimited):
        decide(gateway_for(quota))
    assert len(quota.requests) == 1


def test_a_run_sends_each_attempt_once_so_a_refused_connection_is_tried_max_retries_plus_one_times(
        gateway_for, fast_backoff):
    refused = Always(0, {})
    refused.error = httpx.ConnectError("connection refused")
    with pytest.raises(ConnectionFailed):
        decide(gateway_for(refused))
    assert len(refused.requests) == 1 + limits.MAX_RETRIES_DEFAULT  # not the transport's 3 inside each of 3
