"""One vocabulary for how an answer ended, the same from a typed result, a raw body and a stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gwlab.wire import chat, endings, messages, responses
from gwlab.wire.sse import decode


def _chat_body(*reasons: str | None, refusal: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": "x", "refusal": refusal},
                         "finish_reason": reason} for i, reason in enumerate(reasons)]}


@pytest.mark.parametrize(("reasons", "ending"), [
    (("stop",), "complete"), (("tool_calls",), "complete"), (("length",), "capped"),
    (("content_filter",), "filtered"), (("eos_token",), "other"), ((None,), "interrupted"), ((), "interrupted"),
    (("stop", "length"), "capped"), (("stop", None), "interrupted")])
def test_a_chat_answer_ends_as_its_least_finished_choice(reasons, ending):
    body = _chat_body(*reasons)
    assert chat.parse_response(body).ending == endings.body_ending("chat", body) == ending


def test_a_chat_refusal_is_refused_not_complete():
    body = _chat_body("stop", refusal="I can't help with that.")
    assert chat.parse_response(body).ending == endings.body_ending("chat", body) == "refused"


@pytest.mark.parametrize(("status", "details", "ending"), [
    ("completed", None, "complete"), ("incomplete", {"reason": "max_output_tokens"}, "capped"),
    ("incomplete", {"reason": "content_filter"}, "filtered"), ("incomplete", None, "other"),
    ("failed", None, "failed"), ("in_progress", None, "interrupted"), ("cancelled", None, "stopped")])
def test_a_response_ends_by_its_status_and_incomplete_reason(status, details, ending):
    body = {"status": status, "incomplete_details": details, "output": []}
    assert responses.parse_response(body).ending == endings.body_ending("responses", body) == ending


@pytest.mark.parametrize(("stop_reason", "ending"), [
    ("end_turn", "complete"), ("stop_sequence", "complete"), ("tool_use", "complete"), ("max_tokens", "capped"),
    ("refusal", "refused"), ("pause_turn", "other"), (None, "interrupted")])
def test_a_message_ends_by_its_stop_reason(stop_reason, ending):
    body = {"type": "message", "content": [], "stop_reason": stop_reason}
    assert messages.parse_response(body).ending == endings.body_ending("messages", body) == ending


def test_only_the_ending_complete_is_complete():
    assert [endings.is_complete(e) for e in endings.ENDINGS] == [e == "complete" for e in endings.ENDINGS]
    assert endings.is_complete(None) is None


def test_bodies_that_are_no_answer_have_no_ending():
    assert endings.body_ending("responses", {"id": "resp_1", "deleted": True}) is None
    assert endings.body_ending("decisions", {"answers": {}}) is None


def _feed(acc: Any, payload: bytes) -> Any:
    for event in decode(payload):
        acc.add(event)
    return acc


def test_a_chat_stream_ended_by_a_bare_done_is_interrupted_not_completed():
    acc = _feed(chat.ChatAccumulator(), b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
                                        b"data: [DONE]\n\n")
    assert (acc.status, acc.ending, acc.complete) == ("interrupted", "interrupted", False)


def test_a_capped_chat_stream_has_ended_but_is_not_complete():
    acc = _feed(chat.ChatAccumulator(), b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},'
                                        b'"finish_reason":"length"}]}\n\ndata: [DONE]\n\n')
    assert (acc.status, acc.ending, acc.complete) == ("completed", "capped", False)


def test_a_messages_stream_stopped_without_a_stop_reason_is_interrupted():
    acc = _feed(messages.MessagesAccumulator(), b'event: message_start\ndata: {"type":"message_start",'
                                                b'"message":{"id":"m","content":[]}}\n\n'
                                                b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert (acc.status, acc.ending, acc.complete) == ("interrupted", "interrupted", False)


def test_a_capped_response_stream_says_capped():
    final = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}
    acc = _feed(responses.ResponsesAccumulator(),
                b'event: response.incomplete\ndata: {"type":"response.incomplete","sequence_number":1,'
                b'"response":' + json.dumps(final).encode() + b"}\n\n")
    assert (acc.status, acc.ending, acc.complete) == ("incomplete", "capped", False)
