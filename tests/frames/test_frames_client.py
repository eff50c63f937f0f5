"""The frames layer's door to the client (gwlab/frames/_client.py): a run, and a task batch, retries by the
client transport's own policy. Faults are injected through httpx.MockTransport under a real Gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway
from gwlab.client.transport.status import status_error
from gwlab.errors import ConnectionFailed, RateLimited
from gwlab.frames.run.limiter import TokenBucket
from gwlab.wire import limits
from tests.support.fakes import PauseSpy
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

    def make(handler: Always, **options: Any) -> Gateway:
        gateway = Gateway("http://gateway.test/v1", api_key=KEY, http_transport=httpx.MockTransport(handler),
                          **options)
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


SLOW_DOWN = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}


def draw(gateway: Gateway, folder: Path, limiter: TokenBucket) -> pd.DataFrame:
    frame = pd.DataFrame({"scene": ["a cat on a hill"]})
    return frame.gw.images("{scene}", gateway=gateway, limiter=limiter, checkpoint=None, progress=False,
                           errors="coerce", folder=folder)


@pytest.mark.parametrize("headers", [{"retry-after": "0.02"}, {}], ids=["retry-after", "no-header"])
def test_a_task_batch_waits_after_a_429_what_the_transport_policy_says(
        gateway_for, headers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BACKOFF_BASE_SECONDS", 0.003)  # no copy of the rule could guess this wait
    monkeypatch.setattr(limits, "BACKOFF_JITTER", 0.0)
    limited, spy = Always(429, SLOW_DOWN, **headers), PauseSpy()
    gateway = gateway_for(limited)
    out = draw(gateway, tmp_path, spy)
    refusal = status_error(429, headers, None, method="POST", path="/images")
    policy = gateway.twin.transport.retry
    assert spy.paused == [policy.delay(refusal, n, idempotent=True) for n in range(policy.max_retries)]
    assert len(limited.requests) == 1 + policy.max_retries
    assert out["error"].iloc[0].startswith("RateLimited")


@pytest.mark.parametrize(("body", "headers"), [
    (SLOW_DOWN, {"retry-after": "0.3"}),  # beyond this gateway's retry_after_cap: not waited through
    ({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}}, {}),
], ids=["beyond-the-cap", "quota-exhausted"])
def test_a_task_batch_does_not_resend_a_submission_the_transport_policy_would_not(
        gateway_for, body: dict, headers: dict[str, str], tmp_path: Path) -> None:
    limited, spy = Always(429, body, **headers), PauseSpy()
    out = draw(gateway_for(limited, retry_after_cap=0.1), tmp_path, spy)
    assert len(limited.requests) == 1 and spy.paused == []
    assert out["error"].iloc[0].startswith("RateLimited")
