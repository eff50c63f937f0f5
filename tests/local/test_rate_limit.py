"""`gwlab serve --rate-limit-rpm 3`: the fourth request of a key is a 429 that says when to retry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import typesafe_sdk as ts

from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

RPM = 3
SYSTEM_ONE = {"model": "local/decide-e5-small", "state": "x",
              "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    db = Path(tmp_path_factory.mktemp("limited")) / "g.sqlite"
    running = start_gateway(db, "--rate-limit-rpm", str(RPM))
    yield running
    stop_gateway(running)


def _spend(gateway: RunningGateway, request: httpx.Request) -> list[httpx.Response]:
    with httpx.Client(timeout=30) as client:
        return [client.send(request) for _ in range(RPM + 1)]


def _assert_limited(responses: list[httpx.Response]) -> httpx.Response:
    *allowed, limited = responses
    for r in allowed:
        assert r.status_code != 429
        assert r.headers["x-ratelimit-limit-requests"] == str(RPM)
    assert [int(r.headers["x-ratelimit-remaining-requests"]) for r in allowed] == list(range(RPM - 1, -1, -1))
    assert limited.status_code == 429
    assert float(limited.headers["retry-after"]) > 0 and int(limited.headers["retry-after-ms"]) > 0
    assert limited.headers["x-ratelimit-limit-requests"] == str(RPM)
    assert limited.headers["x-ratelimit-remaining-requests"] == "0"
    assert limited.headers["x-ratelimit-reset-requests"].endswith("s")
    assert limited.headers["x-request-id"].startswith("req_")
    return limited


def test_fourth_request_is_429_in_the_openai_shape(limited: RunningGateway) -> None:
    key = limited.create_key("rl-openai")
    request = httpx.Request("GET", f"{limited.base_url}/models", headers={"Authorization": f"Bearer {key}"})
    error = _assert_limited(_spend(limited, request)).json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests" and error["message"]


def test_fourth_request_is_429_in_the_typesafe_shape(limited: RunningGateway) -> None:
    key = limited.create_key("rl-typesafe")
    request = httpx.Request("POST", f"{limited.base_url}/systemone", json=SYSTEM_ONE,
                            headers={"Authorization": f"Bearer {key}"})
    r = _assert_limited(_spend(limited, request))
    assert r.json()["detail"]["error_type"] == "rate_limit_exceeded" and r.json()["detail"]["message"]
    assert r.headers["x-typesafe-request-id"] == r.headers["x-request-id"]


def test_fourth_request_is_429_in_the_anthropic_shape(limited: RunningGateway) -> None:
    key = limited.create_key("rl-anthropic")
    request = httpx.Request("POST", f"{limited.base_url}/messages", json={"model": "local/gemma-3-270m"},
                            headers={"x-api-key": key, "anthropic-version": "2023-06-01"})
    body = _assert_limited(_spend(limited, request)).json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"


def test_the_limit_is_per_key(limited: RunningGateway) -> None:
    spent, fresh = limited.create_key("rl-spent"), limited.create_key("rl-fresh")
    request = httpx.Request("GET", f"{limited.base_url}/models", headers={"Authorization": f"Bearer {spent}"})
    assert _spend(limited, request)[-1].status_code == 429
    other = httpx.get(f"{limited.base_url}/models", headers={"Authorization": f"Bearer {fresh}"}, timeout=30)
    assert other.status_code == 200


def test_requests_without_a_valid_key_do_not_spend_a_keys_budget(limited: RunningGateway) -> None:
    key = limited.create_key("rl-untouched")
    for _ in range(RPM + 2):
        assert httpx.get(f"{limited.base_url}/models", timeout=30).status_code == 401
    r = httpx.get(f"{limited.base_url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200 and r.headers["x-ratelimit-remaining-requests"] == str(RPM - 1)


def test_the_sdks_raise_their_rate_limit_errors(limited: RunningGateway) -> None:
    key = limited.create_key("rl-sdks")
    client = openai.OpenAI(base_url=limited.base_url, api_key=key, max_retries=0)
    for _ in range(RPM):
        client.models.list()
    with pytest.raises(openai.RateLimitError) as caught:
        client.models.list()
    assert caught.value.code == "rate_limit_exceeded"
    with ts.TypeSafeClient(api_key=key, base_url=limited.api_host, model=SYSTEM_ONE["model"],
                           retry=ts.RetryPolicy(max_retries=0)) as typesafe, \
            pytest.raises(ts.TypeSafeRateLimitError):
        typesafe.models.list()
