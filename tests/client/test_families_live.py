"""The client against the real embedded gateway (`gwlab serve` on loopback, real local models).

Nothing is mocked here: each family's create and stream, previous_response_id, the messages auth,
errors with request ids, and the ledger rows of every call, over both HTTP transports (the fast
path and httpx's own, gwlab/client/transport/choice.py). Gemma 3 270M is a base model, so the
prompts are completion prompts and the assertions are about protocol, not wisdom.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

import gwlab
from gwlab import errors
from gwlab.wire.responses import MessageItem
from tests.support.models import DECIDE_MODEL, TEXT_MODEL

session_loop = pytest.mark.asyncio(loop_scope="session")  # the loop the async fixtures run on

TEXT = TEXT_MODEL
DECIDE = DECIDE_MODEL
PROMPT = "Q: What is the capital of France?\nA:"
TRANSPORTS = ["fast", "httpx"]


@pytest.fixture(params=TRANSPORTS)
async def agw(gateway, request) -> AsyncIterator[gwlab.AsyncGateway]:
    async with gwlab.AsyncGateway(gateway.base_url, gateway.api_key, http_transport=request.param) as client:
        assert client.http_transport.name == request.param
        yield client


@pytest.fixture(params=TRANSPORTS)
def sgw(gateway, request) -> Iterator[gwlab.Gateway]:
    with gwlab.Gateway(gateway.base_url, gateway.api_key, http_transport=request.param) as client:
        assert client.http_transport.name == request.param
        yield client


@session_loop
async def test_models_lists_the_local_models(agw):
    ids = await agw.models()
    assert TEXT in ids and DECIDE in ids
    listing = await agw.models.list()
    assert TEXT in listing and listing.request_id


@session_loop
async def test_base_url_without_v1_reaches_the_same_gateway(gateway):
    async with gwlab.AsyncGateway(gateway.base_url.removesuffix("/v1"), gateway.api_key) as client:
        assert TEXT in await client.models()


@session_loop
async def test_chat_create_returns_text_usage_and_a_request_id(agw):
    result = await agw.chat(PROMPT, model=TEXT, max_completion_tokens=8)
    assert result.choices and result.finish_reason in ("stop", "length")
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.request_id and result.model == TEXT


@session_loop
async def test_chat_stream_completes_at_done_and_matches_its_result(agw):
    stream = await agw.chat.stream(PROMPT, model=TEXT, max_completion_tokens=8)
    pieces = [chunk.text async for chunk in stream]
    # 8 tokens may cap the answer: capped is a proper end (status completed), but not `complete`
    assert stream.status == "completed" and stream.ending in ("complete", "capped")
    assert stream.complete == (stream.ending == "complete")
    assert "".join(pieces) == stream.text == stream.result.text
    assert stream.usage is not None and stream.usage.output_tokens > 0  # the include_usage chunk
    row = agw.ledger.entries()[-1]
    assert (row.streamed, row.ending, row.complete, row.status) == (True, stream.ending, stream.complete, 200)
    assert row.request_id


def test_sync_chat_and_stream(sgw):
    assert sgw.chat(PROMPT, model=TEXT, max_completion_tokens=4).request_id
    with sgw.chat.stream(PROMPT, model=TEXT, max_completion_tokens=4) as stream:
        texts = [chunk.text for chunk in stream]
    assert stream.ending in ("complete", "capped") and "".join(texts) == stream.text


@session_loop
async def test_responses_create_returns_typed_output_items(agw):
    result = await agw.responses.create(PROMPT, model=TEXT, max_output_tokens=8)
    assert result.status in ("completed", "incomplete") and result.id
    assert isinstance(result.output[0], MessageItem) and result.text == result.output[0].text
    assert result.usage.input_tokens > 0 and result.request_id


@session_loop
async def test_responses_stream_dispatches_by_type_and_ends_in_a_terminal_event(agw):
    stream = await agw.responses.stream(PROMPT, model=TEXT, max_output_tokens=8)
    events = [event async for event in stream]
    types = [event.type for event in events]
    assert types[0] == "response.created"
    assert types[-1] in ("response.completed", "response.incomplete")
    assert stream.status in ("completed", "incomplete") and stream.complete == (stream.status == "completed")
    assert "".join(event.text for event in events) == stream.text == stream.result.text


@session_loop
async def test_previous_response_id_continues_a_stored_response(agw):
    first = await agw.responses.create("Q: Name a colour.\nA:", model=TEXT, max_output_tokens=6)
    second = await agw.responses.create("Q: Name another one.\nA:", model=TEXT, max_output_tokens=6,
                                        previous_response_id=first.id, instructions="Answer briefly.")
    assert second.id != first.id and second.previous_response_id == first.id
    stored = await agw.responses.retrieve(first.id)
    assert stored.id == first.id and stored.text == first.text


@session_loop
async def test_messages_create_and_stream_with_x_api_key(agw):
    message = await agw.messages.create(PROMPT, model=TEXT, max_tokens=8)
    # a base model may stop at once: the claims are about the protocol, not the wording
    assert message.stop_reason in ("end_turn", "max_tokens", "stop_sequence") and message.request_id
    assert message.usage.input_tokens > 0
    stream = await agw.messages.stream(PROMPT, model=TEXT, max_tokens=8)
    texts = [event.text async for event in stream]
    assert stream.ending in ("complete", "capped") and stream.complete == (stream.ending == "complete")
    assert "".join(texts) == stream.text and stream.usage.output_tokens > 0


@session_loop
async def test_messages_also_work_with_bearer_and_the_newer_version(gateway):
    async with gwlab.AsyncGateway(gateway.base_url, gateway.api_key, messages_auth="bearer",
                                  anthropic_version="2026-10-21") as client:
        assert (await client.messages.create(PROMPT, model=TEXT, max_tokens=4)).request_id


@session_loop
async def test_a_wrong_key_is_authentication_failed_with_a_request_id(gateway):
    async with gwlab.AsyncGateway(gateway.base_url, "gwk-not-a-real-key") as client:
        with pytest.raises(errors.AuthenticationFailed) as info:
            await client.models()
    assert info.value.status == 401 and info.value.request_id
    assert "gwk-not-a-real-key" not in str(info.value)


@session_loop
async def test_an_unknown_model_is_a_status_error_naming_the_call(agw):
    with pytest.raises(errors.StatusError) as info:
        await agw.chat(PROMPT, model="local/no-such-model", max_completion_tokens=2)
    assert info.value.status in (400, 404) and info.value.path == "/chat/completions"


@session_loop
async def test_every_call_is_in_the_ledger_with_its_request_id(agw):
    await agw.models()
    await agw.chat(PROMPT, model=TEXT, max_completion_tokens=2)
    frame = agw.usage
    assert len(frame) == 2 and frame["request_id"].notna().all()
    assert list(frame["status"]) == [200, 200] and list(frame["family"]) == ["models", "chat"]
    assert frame.loc[1, "model"] == TEXT and frame.loc[1, "input_tokens"] > 0
