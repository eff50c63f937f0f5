"""Retries, backoff and error mapping, with faults injected through httpx.MockTransport."""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import pytest

from gwlab import errors
from gwlab.client.transport.status import retry_after_seconds
from tests.support.fakes import chat_body

pytestmark = pytest.mark.usefixtures("fast_retries")


class Script:
    """Answers from a list, one per request; records what was asked."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def rate_limited(code: str = "rate_limit_exceeded", **headers: str) -> httpx.Response:
    body = {"error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": code}}
    return httpx.Response(429, json=body, headers={"x-request-id": "req_429", **headers})


def ok() -> httpx.Response:
    return httpx.Response(200, json=chat_body(), headers={"x-request-id": "req_ok"})


async def test_429_storm_with_retry_after_is_retried_up_to_the_limit_then_raises_rate_limited(make_gateway):
    script = Script(rate_limited(**{"retry-after": "0.01"}))
    gw = make_gateway(script, max_retries=2)
    with pytest.raises(errors.RateLimited) as info:
        await gw.chat("hi", model="m")
    assert len(script.requests) == 3
    error = info.value
    assert (error.status, error.request_id, error.retry_after, error.code) == (429, "req_429", 0.01,
                                                                              "rate_limit_exceeded")
    assert error.method == "POST" and error.path == "/chat/completions"
    assert "req_429" in str(error) and "429" in str(error)
    [row] = gw.ledger.entries()
    assert (row.retries, row.status, row.request_id, row.error) == (2, 429, "req_429", "RateLimited")


async def test_retry_after_ms_takes_precedence_and_is_honoured(make_gateway):
    script = Script(rate_limited(**{"retry-after-ms": "30", "retry-after": "100"}), ok())
    gw = make_gateway(script)
    started = time.perf_counter()
    result = await gw.chat("hi", model="m")
    assert time.perf_counter() - started >= 0.03
    assert result.text == "Hello" and len(script.requests) == 2


async def test_5xx_then_success_returns_the_success(make_gateway):
    script = Script(httpx.Response(503, text="busy"), httpx.Response(502, text="bad gateway"), ok())
    gw = make_gateway(script)
    result = await gw.chat("hi", model="m")
    assert result.text == "Hello" and result.request_id == "req_ok"
    assert gw.ledger.entries()[0].retries == 2


async def test_quota_exhausted_429_is_not_retried(make_gateway):
    script = Script(rate_limited(code="insufficient_quota", **{"retry-after": "0"}))
    gw = make_gateway(script)
    with pytest.raises(errors.RateLimited) as info:
        await gw.chat("hi", model="m")
    assert len(script.requests) == 1 and info.value.code == "insufficient_quota"


async def test_429_with_retry_after_beyond_the_cap_is_not_retried(make_gateway):
    script = Script(rate_limited(**{"retry-after": "3600"}))
    gw = make_gateway(script, retry_after_cap=60)
    started = time.perf_counter()
    with pytest.raises(errors.RateLimited) as info:
        await gw.chat("hi", model="m")
    assert len(script.requests) == 1 and info.value.retry_after == 3600
    assert time.perf_counter() - started < 1


async def test_x_should_retry_false_stops_a_retryable_status(make_gateway):
    script = Script(httpx.Response(503, headers={"x-should-retry": "false"}))
    gw = make_gateway(script)
    with pytest.raises(errors.ServerError):
        await gw.chat("hi", model="m")
    assert len(script.requests) == 1


async def test_x_should_retry_true_retries_an_otherwise_final_status(make_gateway):
    flaky = httpx.Response(400, json={"error": {"message": "flaky"}}, headers={"x-should-retry": "true"})
    script = Script(flaky, ok())
    gw = make_gateway(script)
    assert (await gw.chat("hi", model="m")).text == "Hello"


async def test_400_401_403_404_are_not_retried_and_map_to_their_classes(make_gateway):
    for status, cls in [(400, errors.BadRequest), (401, errors.AuthenticationFailed),
                        (403, errors.PermissionDenied), (404, errors.NotFound), (422, errors.BadRequest)]:
        script = Script(httpx.Response(status, json={"error": {"message": "no", "code": "c"}},
                                       headers={"request-id": f"req_{status}"}))
        gw = make_gateway(script)
        with pytest.raises(cls) as info:
            await gw.models()
        assert len(script.requests) == 1
        error = info.value
        assert (error.status, error.request_id, error.error["code"]) == (status, f"req_{status}", "c")


async def test_connection_error_is_retried_for_an_idempotent_get(make_gateway):
    script = Script(httpx.ReadError("reset"), httpx.Response(200, json={"data": [{"id": "m1"}]}))
    gw = make_gateway(script)
    assert await gw.models() == ["m1"]
    assert len(script.requests) == 2


async def test_connection_error_after_sending_is_not_retried_for_a_non_idempotent_post(make_gateway):
    script = Script(httpx.RemoteProtocolError("Server disconnected"), ok())
    gw = make_gateway(script)
    with pytest.raises(errors.ConnectionFailed) as info:
        await gw.transport.request("POST", "/videos", family="tasks", json={"prompt": "a cat"})
    assert len(script.requests) == 1
    assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)
    assert gw.ledger.entries()[0].error == "ConnectionFailed"


async def test_connection_never_opened_is_retried_even_for_a_non_idempotent_post(make_gateway):
    script = Script(httpx.ConnectError("refused"), httpx.Response(200, json={"id": "video_1"}))
    gw = make_gateway(script)
    reply = await gw.transport.request("POST", "/videos", family="tasks", json={"prompt": "a cat"})
    assert reply.body == {"id": "video_1"} and len(script.requests) == 2


async def test_non_idempotent_post_is_not_retried_on_5xx(make_gateway):
    script = Script(httpx.Response(503), ok())
    gw = make_gateway(script)
    with pytest.raises(errors.ServerError):
        await gw.transport.request("POST", "/videos", family="tasks", json={"prompt": "a cat"})
    assert len(script.requests) == 1


async def test_caller_may_mark_a_post_idempotent(make_gateway):
    script = Script(httpx.Response(503), httpx.Response(200, json={"ok": True}))
    gw = make_gateway(script)
    reply = await gw.transport.request("POST", "/videos", family="tasks", json={}, idempotent=True)
    assert reply.body == {"ok": True}


@pytest.mark.parametrize("fault", [httpx.Response(503), httpx.ConnectError("refused")])
async def test_retries_0_sends_once_whatever_the_error(make_gateway, fault):
    script = Script(fault, ok())
    gw = make_gateway(script)
    with pytest.raises(errors.GatewayError):
        await gw.transport.request("POST", "/chat/completions", family="chat", json={}, retries=0)
    assert len(script.requests) == 1


async def test_a_negative_retries_is_refused_naming_it_before_sending(make_gateway):
    script = Script(ok())
    gw = make_gateway(script)
    with pytest.raises(errors.InvalidRequest) as info:
        await gw.transport.request("GET", "/models", family="models", retries=-1)
    assert info.value.field == "retries" and not script.requests and not gw.ledger.entries()


async def test_read_timeout_maps_to_timeout_from_the_httpx_error(make_gateway):
    script = Script(httpx.ReadTimeout("slow"))
    gw = make_gateway(script, max_retries=0)
    with pytest.raises(errors.Timeout) as info:
        await gw.models()
    assert isinstance(info.value, errors.ConnectionFailed)
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


async def test_overall_deadline_bounds_the_whole_call(make_gateway):
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return ok()

    gw = make_gateway(slow, deadline=0.05)
    started = time.perf_counter()
    with pytest.raises(errors.Timeout, match="deadline"):
        await gw.chat("hi", model="m")
    assert time.perf_counter() - started < 2
    assert gw.ledger.entries()[0].error == "Timeout"


async def test_no_retry_outlives_the_deadline(make_gateway):
    script = Script(rate_limited(**{"retry-after": "5"}))
    gw = make_gateway(script, deadline=1.0)
    with pytest.raises(errors.RateLimited):
        await gw.chat("hi", model="m")
    assert len(script.requests) == 1


async def test_content_type_decides_the_parser(make_gateway):
    script = Script(httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}))
    gw = make_gateway(script)
    with pytest.raises(errors.ProtocolError, match="expected application/json"):
        await gw.models()
    script.answers = [httpx.Response(200, content=b"\x00\x01mp4", headers={"content-type": "video/mp4"})]
    reply = await gw.transport.request("GET", "/videos/{video_id}/content", family="tasks",
                                       path_params={"video_id": "v 1/x"}, expect_json=False)
    assert reply.body == b"\x00\x01mp4"
    assert script.requests[-1].url.raw_path == b"/v1/videos/v%201%2Fx/content"


async def test_broken_json_with_a_json_content_type_is_a_protocol_error(make_gateway):
    broken = httpx.Response(200, content=b"{oops", headers={"content-type": "application/json"})
    gw = make_gateway(Script(broken))
    with pytest.raises(errors.ProtocolError, match="not valid JSON"):
        await gw.models()


async def test_error_body_of_any_family_gives_the_message(make_gateway):
    anthropic = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                 "request_id": "req_body"}
    gw = make_gateway(Script(httpx.Response(529, json=anthropic)), max_retries=0)
    with pytest.raises(errors.ServerError) as info:
        await gw.messages.create("hi", model="m", max_tokens=5)
    assert "Overloaded" in str(info.value) and info.value.request_id == "req_body"
    fastapi = {"detail": [{"loc": ["body", "questions", "q", "criteria"], "msg": "Field required"}]}
    gw = make_gateway(Script(httpx.Response(422, json=fastapi)))
    with pytest.raises(errors.BadRequest, match=r"questions\.q\.criteria: Field required"):
        await gw.models()


def test_retry_after_parses_milliseconds_seconds_and_http_dates():
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after_seconds({"retry-after": future}) <= 31
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
