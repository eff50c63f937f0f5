"""A per-key token budget (tokens per minute) beside the request limit (issue 30, finding 3): a key that has
spent its budget gets a 429 saying so, with `retry-after`; another key is not affected. A gateway of the
test's own, in this process, with a small budget (`Limits.tokens_per_minute`, docs/security.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gwlab.local.limits import Limits
from gwlab.local.server import LocalGateway, start
from gwlab.local.settings import Settings
from gwlab.local.store import Store
from tests.support.models import TEXT_MODEL

BUDGET = 60
PROMPT = "Please summarise the following note about the checkout page and its many failures. " * 8  # > BUDGET tokens


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    settings = Settings(limits=Limits(tokens_per_minute=BUDGET))
    running = start(str(Path(tmp_path_factory.mktemp("budget")) / "gateway.sqlite"), settings=settings)
    try:
        yield running
    finally:
        running.stop()


def _chat(gateway: LocalGateway, key: str) -> httpx.Response:
    return httpx.post(f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {key}"},
                      json={"model": TEXT_MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": PROMPT}]},
                      timeout=httpx.Timeout(120))


def _new_key(gateway: LocalGateway) -> str:
    store = Store(gateway.db_path)
    try:
        return store.create_key(f"budget-{uuid.uuid4().hex[:6]}")
    finally:
        store.close()


def test_a_key_past_its_token_budget_gets_a_429_and_another_key_does_not(gateway: LocalGateway) -> None:
    key = _new_key(gateway)  # a fresh budget
    first = _chat(gateway, key)
    assert first.status_code == 200, first.text[:300]
    assert first.json()["usage"]["prompt_tokens"] > BUDGET  # the answer overdraws the budget
    assert first.headers["x-ratelimit-limit-tokens"] == str(BUDGET)
    refused = _chat(gateway, key)
    assert refused.status_code == 429, refused.text[:300]
    assert refused.json()["error"]["type"] == "tokens" and int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-remaining-tokens"] == "0"
    assert _chat(gateway, _new_key(gateway)).status_code == 200
