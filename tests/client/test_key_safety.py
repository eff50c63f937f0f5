"""A canary key never shows: not in reprs, results, errors, the ledger, nor DEBUG logs."""

from __future__ import annotations

import logging
import traceback

import httpx
import pytest

from gwlab import errors
from tests.support.fakes import CANARY_KEY, chat_body, sse_bytes, sse_response


def echoing_401(request: httpx.Request) -> httpx.Response:
    # a careless gateway that echoes the credential it refused
    sent = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
    body = {"error": {"message": f"Incorrect API key provided: {sent}", "type": "invalid_request_error",
                      "code": "invalid_api_key", "key": sent}}
    return httpx.Response(401, json=body, headers={"x-request-id": "req_401"})


def answers(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/models"):
        return echoing_401(request)
    if b'"stream":true' in request.content:
        chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}
        return sse_response([sse_bytes(chunk, "[DONE]")])
    return httpx.Response(200, json=chat_body(), headers={"x-request-id": "req_ok"})


async def test_key_never_appears_in_repr_error_ledger_or_debug_logs(make_gateway, make_sync_gateway, caplog):
    caplog.set_level(logging.DEBUG)
    gw = make_gateway(answers)
    sync = make_sync_gateway(answers)
    shown: list[str] = [repr(gw), str(gw), repr(sync), str(sync), repr(gw.transport), repr(gw.ledger),
                        repr(vars(gw)), repr(gw.transport.__dict__)]
    result = await gw.chat("hi", model="m")
    shown += [repr(result), str(result), result._repr_html_(), repr(result.raw)]
    stream = await gw.chat.stream("hi", model="m")
    await stream.collect()
    shown += [repr(stream), repr(stream.result)]
    message = await gw.messages.create("hi", model="m", max_tokens=3)
    shown.append(repr(message))
    with pytest.raises(errors.AuthenticationFailed) as info:
        await gw.models()
    error = info.value
    shown += [repr(error), str(error), repr(error.body), repr(error.error), repr(error.headers),
              "".join(traceback.format_exception(error))]
    with pytest.raises(errors.AuthenticationFailed) as sync_info:
        sync.models()
    shown += [str(sync_info.value), repr(sync_info.value.body)]
    shown += [gw.usage.to_string(), sync.usage.to_csv(), repr(gw.ledger.entries())]
    shown += [record.getMessage() for record in caplog.records]
    assert caplog.records, "httpx and gwlab DEBUG logging was captured"
    leaks = [text for text in shown if CANARY_KEY in text]
    assert not leaks
    assert "[redacted]" in str(error)


async def test_messages_family_sends_the_key_only_in_its_header(make_gateway):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"content": [], "usage": {"input_tokens": 1, "output_tokens": 1}})

    gw = make_gateway(handler)
    await gw.messages.create("hi", model="m", max_tokens=3)
    request = seen[0]
    assert request.headers["x-api-key"] == CANARY_KEY and "authorization" not in request.headers
    assert CANARY_KEY not in str(request.url) and CANARY_KEY.encode() not in request.content


def test_help_of_connect_does_not_show_the_environment(monkeypatch):
    import inspect
    import pydoc

    import gwlab

    monkeypatch.setenv("GWLAB_API_KEY", CANARY_KEY)
    assert CANARY_KEY not in str(inspect.signature(gwlab.connect))
    assert CANARY_KEY not in pydoc.render_doc(gwlab.connect, renderer=pydoc.plaintext)
