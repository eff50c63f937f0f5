"""The batch runner's rules, with faults injected through a fake sender (the real gateway is in
test_accessor.py): shared pauses on 429, limits, budget, repeats, pilot, errors as rows, checkpoints."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.transport.retry import RetryPolicy
from gwlab.errors import BadRequest, ConnectionFailed, RateLimited, ServerError
from gwlab.frames._client import Connection
from gwlab.frames.recipes import decisions_recipe
from gwlab.frames.run.limiter import SharedTokenBucket, TokenBucket
from gwlab.frames.run.runner import Answer, Budget
from gwlab.frames.store.checkpoint import Checkpoint, canonical
from gwlab.wire import limits
from gwlab.wire.families import ProtocolFamily
from tests.support.fakes import PauseSpy

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "criteria": {"billing": "money matters", "tech": "bugs"}}}


class FakeGateway:
    """Answers decisions from the state text; can fail or rate-limit on cue."""

    def __init__(self, *, fail_on: str | None = None, limit_first: int = 0, noul: Any = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail_on, self.limit_first, self.noul = fail_on, limit_first, noul

    async def send(self, family: ProtocolFamily, body: dict[str, Any]) -> Answer:
        self.bodies.append(body)
        n = len(self.bodies)
        await asyncio.sleep(0)
        if self.limit_first > 0:
            self.limit_first -= 1
            raise RateLimited("slow down", retry_after=0.01, status=429)
        state = body["state"] if isinstance(body["state"], str) else json.dumps(body["state"])
        if self.fail_on and self.fail_on in state:
            raise BadRequest("state: refused", status=400, request_id="req_bad")
        noul = self.noul(n) if self.noul else (0.9 if "urgent" in state else 0.2)
        data = {"model": body["model"], "usage": {"input_tokens": 10 + len(state), "output_tokens": 0},
                "answers": {"urgent": {"type": "noul", "noul": noul},
                            "team": {"type": "choice", "choice": "tech", "confidence": 0.4,
                                     "probabilities": {"billing": 0.3, "tech": 0.7}}}}
        return Answer(data, json.dumps(data), f"req_{n}")

    def connection(self) -> Connection:
        return Connection(self.send)


@pytest.fixture
def tickets() -> pd.DataFrame:
    return pd.DataFrame({"text": ["urgent: server down", "invoice wrong", "urgent: server down", "hello"]},
                        index=pd.Index([7, 8, 7, 9], name="id"))


def decide(frame: pd.DataFrame, fake: FakeGateway, **options: Any) -> pd.DataFrame:
    options.setdefault("checkpoint", None)
    return frame.gw.decide("{text}", QUESTIONS, gateway=fake.connection(), progress=False, **options)


def test_identical_rows_are_sent_once_and_share_the_answer(tickets: pd.DataFrame) -> None:
    fake = FakeGateway()
    out = decide(tickets, fake)
    assert len(fake.bodies) == 3
    assert list(out["__status"]) == ["sent", "sent", "duplicate", "sent"]
    assert out["__request_id"].iloc[0] == out["__request_id"].iloc[2]
    assert out.run.sent == 3 and out.run.duplicate_rows == 1


def test_a_429_pauses_the_shared_limiter_for_its_retry_after_and_is_retried(tickets: pd.DataFrame) -> None:
    class Spy(TokenBucket):
        paused: ClassVar[list[float]] = []

        def pause(self, seconds: float) -> None:
            self.paused.append(seconds)
            super().pause(seconds)

    fake = FakeGateway(limit_first=1)
    out = decide(tickets, fake, limiter=Spy(), concurrency=1)
    assert Spy.paused == [0.01]
    assert out["__error"].isna().all() and out.run.rate_limited == 1


def test_rate_limits_beyond_the_retries_become_error_rows(tickets: pd.DataFrame) -> None:
    fake = FakeGateway(limit_first=100)
    out = decide(tickets, fake, errors="coerce", concurrency=1)
    assert out["__error"].str.startswith("RateLimited").all()
    assert out["urgent__noul"].isna().all()


def test_failed_row_is_an_error_row_and_the_others_are_answered(tickets: pd.DataFrame) -> None:
    out = decide(tickets, FakeGateway(fail_on="invoice"), errors="coerce")
    bad = out.iloc[1]
    assert bad["__status"] == "error" and bad["__error"].startswith("BadRequest")
    assert pd.isna(bad["urgent__noul"]) and pd.isna(bad["team__choice"])
    assert bad["__request_id"] == "req_bad"
    assert out.drop(index=8)["urgent__noul"].notna().all()


def test_errors_raise_is_the_default(tickets: pd.DataFrame) -> None:
    with pytest.raises(BadRequest):
        decide(tickets, FakeGateway(fail_on="invoice"))


def test_budget_stops_before_a_request_that_would_exceed_it(tickets: pd.DataFrame) -> None:
    fake = FakeGateway()
    # room for one conservative estimate (the body's bytes), not for a second after it is billed
    one_request = len(canonical(_body("urgent: server down")).encode()) + 8 + 5
    out = decide(tickets, fake, budget=one_request, concurrency=4)
    billed = sum(10 + len(b["state"]) for b in fake.bodies)
    assert len(fake.bodies) == 1 and billed <= one_request
    assert out.run.stopped == "budget"
    assert list(out["__status"]) == ["sent", "not_run", "duplicate", "not_run"]
    assert out.loc[8, "__error"] is pd.NA or pd.isna(out.loc[8, "__error"])


def _body(state: str) -> dict[str, Any]:
    return decisions_recipe(QUESTIONS, "local/decide-e5-small").body(state)


def test_cost_budget_needs_prices_and_counts_input_only_for_decisions(tickets: pd.DataFrame) -> None:
    fake = FakeGateway()
    prices = {"local/decide-e5-small": {"input": 1_000_000.0, "output": 1e12}}  # $1 per input token
    out = decide(tickets, fake, budget=Budget(cost=10_000.0, prices=prices))
    assert out.run.sent == 3
    assert out.run.cost == pytest.approx(sum(10 + len(b["state"]) for b in fake.bodies))


def test_pilot_runs_the_first_rows_and_estimates_the_rest(tickets: pd.DataFrame) -> None:
    fake = FakeGateway()
    out = decide(tickets, fake, pilot=2)
    assert len(fake.bodies) == 2
    assert list(out["__status"]) == ["sent", "sent", "duplicate", "not_run"]
    pilot = out.run.pilot
    assert pilot["rows"] == 1 and pilot["requests"] == 1 and pilot["input_tokens"] > 0
    assert "pilot" in repr(out)


def test_repeats_ask_k_times_and_report_the_spread(tickets: pd.DataFrame) -> None:
    fake = FakeGateway(noul=lambda n: [0.2, 0.4, 0.6][(n - 1) % 3])
    out = decide(tickets.iloc[:1], fake, repeats=3)
    assert len(fake.bodies) == 3
    assert out["urgent__noul"].iloc[0] == pytest.approx(0.4)
    assert out["urgent__noul__std"].iloc[0] == pytest.approx(0.2)
    assert out["team__p__tech__std"].iloc[0] == pytest.approx(0.0)
    assert out["team__choice"].iloc[0] == "tech" and out["__repeats"].iloc[0] == 3


def test_checkpointed_answers_are_not_sent_again_unless_refreshed(tickets: pd.DataFrame,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    first, second, third = FakeGateway(), FakeGateway(), FakeGateway()
    decide(tickets, first, checkpoint=path)
    again = decide(tickets, second, checkpoint=path)
    assert len(second.bodies) == 0 and list(again["__status"]) == ["cached", "cached", "duplicate", "cached"]
    assert again.run.input_tokens == 0 and again.run.cached == 3 and again.run.duplicate_rows == 1
    decide(tickets, third, checkpoint=path, refresh=True)
    assert len(third.bodies) == 3


def test_repeats_are_keyed_apart_from_the_plain_request(tickets: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    decide(tickets.iloc[:1], FakeGateway(), checkpoint=path)
    fake = FakeGateway()
    decide(tickets.iloc[:1], fake, checkpoint=path, repeats=3)
    assert len(fake.bodies) == 2  # repeat 0 came from the checkpoint
    with Checkpoint(path) as checkpoint:
        assert len(checkpoint) == 3


def test_token_bucket_holds_requests_per_minute_with_a_shared_pause() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(requests_per_minute=60, burst=2, clock=lambda: now[0], sleep=sleep)

    async def take(n: int) -> None:
        for _ in range(n):
            await bucket.acquire(0)

    asyncio.run(take(2))
    assert slept == []  # the burst
    asyncio.run(take(1))
    assert slept == [pytest.approx(1.0)]  # 60/min: one per second
    bucket.pause(5.0)
    asyncio.run(take(1))
    assert sum(slept) == pytest.approx(6.0)


def test_token_bucket_lets_an_oversized_request_through_when_full() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    bucket = TokenBucket(tokens_per_minute=600, burst=1, clock=lambda: now[0], sleep=sleep)  # holds 10
    asyncio.run(bucket.acquire(1000))
    assert now[0] == 0.0
    asyncio.run(bucket.acquire(1))  # in debt by 990: waits for the refill
    assert now[0] == pytest.approx(99.1)


def test_shared_bucket_is_one_limit_for_every_instance_on_the_file(tmp_path: Path) -> None:
    a = SharedTokenBucket(tmp_path / "limits.sqlite", requests_per_minute=6, burst=20)  # holds 2
    b = SharedTokenBucket(tmp_path / "limits.sqlite", requests_per_minute=6, burst=20)
    assert a._try(0) == 0.0 and b._try(0) == 0.0
    assert a._try(0) > 9.0 and b._try(0) > 9.0  # 6/min: ~10 s until the next one, for both
    b.pause(100)
    assert a._try(0) > 99.0


@pytest.mark.parametrize(("error", "expected"), [
    (RateLimited("slow", retry_after=3.0, status=429), 3.0),
    (RateLimited("slow", retry_after=None, status=429), 0.5),
    (RateLimited("slow", retry_after=600.0, status=429), None),  # beyond the cap: not slept through
    (RateLimited("quota", status=429, body={"error": {"code": "insufficient_quota"}}), None),
    (RateLimited("quota", status=429, body={"error": {"type": "insufficient_quota"}}), None),
    (ServerError("down", status=503, headers={"Retry-After": "2"}), 2.0),
    (ServerError("down", status=503), 0.5),
    (BadRequest("bad", status=400), None),
    (BadRequest("bad", status=400, headers={"x-should-retry": "true"}), 0.5),
    (ServerError("down", status=500, headers={"x-should-retry": "false"}), None),
    (ConnectionFailed("reset"), 0.5),
])
def test_retries_follow_the_client_transport_rules(error: Exception, expected: float | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BACKOFF_JITTER", 0.0)
    connection = Connection(FakeGateway().send, RetryPolicy(max_retries=2, retry_after_cap=60.0))
    assert connection.retry_delay(error, 0) == expected


def test_a_server_error_is_retried_for_that_row_only(tickets: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BACKOFF_BASE_SECONDS", 0.001)
    fake = FakeGateway()
    failures = [ServerError("down", status=503)]

    async def flaky(family: ProtocolFamily, body: dict[str, Any]) -> Answer:
        if failures:
            raise failures.pop()
        return await fake.send(family, body)

    connection = Connection(flaky)
    out = tickets.gw.decide("{text}", QUESTIONS, gateway=connection, checkpoint=None, progress=False,
                            concurrency=1)
    assert out["__error"].isna().all() and len(fake.bodies) == 3


@pytest.mark.parametrize("retry_after", [0.02, None])
def test_an_injected_connection_waits_after_a_429_what_the_transport_policy_says(
        tickets: pd.DataFrame, retry_after: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BACKOFF_BASE_SECONDS", 0.003)  # no copy of the rule could guess this wait
    monkeypatch.setattr(limits, "BACKOFF_JITTER", 0.0)
    fake, refusal = FakeGateway(), RateLimited("slow down", retry_after=retry_after, status=429)
    refusals = [refusal]

    async def send(path: str, body: dict[str, Any]) -> Answer:
        if refusals:
            raise refusals.pop()
        return await fake.send(path, body)

    spy = PauseSpy()
    out = tickets.gw.decide("{text}", QUESTIONS, gateway=Connection(send), limiter=spy, checkpoint=None,
                            progress=False, concurrency=1)
    assert spy.paused == [RetryPolicy().delay(refusal, 0, idempotent=True)]
    assert out["__error"].isna().all() and out.run.rate_limited == 1
