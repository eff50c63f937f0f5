"""Addressing and auth exactly per spec: one /v1, ws(s) base, encoded path params, auth per family."""

from __future__ import annotations

import httpx
import pytest

from gwlab import errors
from gwlab.client.transport.core import normalize_base_url, ws_url
from tests.support.fakes import CANARY_KEY, chat_body


@pytest.mark.parametrize("given", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/",
                                   "http://h:8000/v1/v1", " http://h:8000/v1 "])
def test_base_url_gets_exactly_one_v1(given: str):
    assert normalize_base_url(given) == "http://h:8000/v1"


def test_a_path_prefix_is_kept():
    assert normalize_base_url("https://api.example.com/gateway") == "https://api.example.com/gateway/v1"


@pytest.mark.parametrize("bad", ["", "h:8000", "ftp://h/v1", "http://h/v1?x=1"])
def test_a_base_url_that_is_not_http_is_refused_naming_the_field(bad: str):
    with pytest.raises(errors.InvalidRequest) as info:
        normalize_base_url(bad)
    assert info.value.field == "base_url"


def test_ws_base_url_follows_the_scheme():
    assert ws_url("http://h/v1") == "ws://h/v1" and ws_url("https://h/v1") == "wss://h/v1"


class Recorder:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("/messages"):
            return httpx.Response(200, json={"content": [{"type": "text", "text": "ok"}]})
        return httpx.Response(200, json=chat_body())


async def test_every_call_lands_under_a_single_v1(make_gateway):
    recorder = Recorder()
    for base in ("http://h:1", "http://h:1/v1", "http://h:1/v1/"):
        gw = make_gateway(recorder, base_url=base)
        await gw.chat("hi", model="m")
        await gw.messages.create("hi", model="m", max_tokens=2)
        assert gw.base_url == "http://h:1/v1" and gw.ws_base_url == "ws://h:1/v1"
    paths = {r.url.path for r in recorder.requests}
    assert paths == {"/v1/chat/completions", "/v1/messages"}


async def test_a_path_repeating_v1_is_refused(make_gateway):
    gw = make_gateway(Recorder())
    with pytest.raises(errors.InvalidRequest, match="already ends in /v1"):
        await gw.transport.request("GET", "/v1/models", family="models")


async def test_path_params_are_url_encoded_and_none_query_params_omitted(make_gateway):
    recorder = Recorder()
    gw = make_gateway(recorder)
    await gw.transport.request("GET", "/videos/{video_id}/content", family="tasks",
                               path_params={"video_id": "a/b c?d"},
                               params={"variant": "video", "after": None})
    request = recorder.requests[0]
    assert request.url.raw_path == b"/v1/videos/a%2Fb%20c%3Fd/content?variant=video"


async def test_unset_optional_body_fields_are_omitted(make_gateway):
    recorder = Recorder()
    gw = make_gateway(recorder)
    await gw.chat("hi", model="m", temperature=None, tools=None, max_completion_tokens=4)
    # the cap travels under both names (client.dialect: token_cap "both")
    assert recorder.requests[0].read() == (b'{"model":"m","messages":[{"role":"user","content":"hi"}],'
                                           b'"max_completion_tokens":4,"max_tokens":4}')


async def test_bearer_for_most_families_and_x_api_key_with_version_for_messages(make_gateway):
    recorder = Recorder()
    gw = make_gateway(recorder)
    await gw.chat("hi", model="m")
    await gw.messages.create("hi", model="m", max_tokens=2, extra_headers={"anthropic-beta": "a-flag"})
    chat, messages = recorder.requests
    assert chat.headers["authorization"] == f"Bearer {CANARY_KEY}" and "x-api-key" not in chat.headers
    assert messages.headers["x-api-key"] == CANARY_KEY and "authorization" not in messages.headers
    assert messages.headers["anthropic-version"] == "2023-06-01"
    assert messages.headers["anthropic-beta"] == "a-flag"
    assert chat.headers["content-type"] == "application/json"


async def test_messages_auth_and_version_are_configurable(make_gateway):
    recorder = Recorder()
    gw = make_gateway(recorder, messages_auth="bearer", anthropic_version="2026-10-21")
    await gw.messages.create("hi", model="m", max_tokens=2)
    request = recorder.requests[0]
    assert request.headers["authorization"] == f"Bearer {CANARY_KEY}" and "x-api-key" not in request.headers
    assert request.headers["anthropic-version"] == "2026-10-21"


async def test_a_missing_key_is_refused_before_anything_is_sent(make_gateway):
    with pytest.raises(errors.InvalidRequest) as info:
        make_gateway(Recorder(), api_key="")
    assert info.value.field == "api_key"
