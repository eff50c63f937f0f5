"""Migration on the gateway: `gw.migrate` (the spec's table, pure) and `gw.responses_from_chat` (live)."""

from __future__ import annotations

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.chat import ChatCompletion
from gwlab.wire.responses import Response
from tests.support.faces import Face, logged
from tests.support.models import TEXT_MODEL

TEXT = TEXT_MODEL
CHAT_REQUEST = {
    "model": TEXT,
    "messages": [{"role": "system", "content": "Answer in one word."},
                 {"role": "user", "content": "Q: What is the capital of France?\nA:"}],
    "max_completion_tokens": 6,
    "temperature": 0,
}


def test_chat_to_responses_follows_the_spec_table(face: Face):
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body = face.gw.migrate.chat_to_responses({**CHAT_REQUEST, "tools": [tool], "seed": 3,
                                              "response_format": {"type": "json_object"}})
    assert body["instructions"] == "Answer in one word."  # leading system message
    assert body["input"] == [{"role": "user", "content": "Q: What is the capital of France?\nA:"}]
    assert body["max_output_tokens"] == 6 and "max_completion_tokens" not in body
    assert body["text"] == {"format": {"type": "json_object"}}
    assert body["tools"] == [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}},
                              "strict": None}]  # not given: null, as the official schema requires it
    assert face.gw.migrate.unmapped({**CHAT_REQUEST, "seed": 3}) == ["seed"]
    assert len(face.gw.ledger) == 0  # pure: nothing sent


def test_result_to_chat_keeps_items_chat_cannot_carry(face: Face):
    response = Response.from_wire({
        "id": "resp_1", "status": "completed", "model": TEXT,
        "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris"}]},
                   {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}],
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}})
    chat = face.gw.migrate.result_to_chat(response)
    message = chat["choices"][0]["message"]
    assert message["content"] == "Paris" and message["tool_calls"][0]["id"] == "call_1"
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert chat["usage"]["prompt_tokens"] == 5 and chat["usage"]["completion_tokens"] == 2
    assert chat["gwlab_unmapped_items"][0]["type"] == "reasoning"  # kept, never dropped
    back = face.gw.migrate.result_to_responses(chat)
    assert [item["type"] for item in back["output"]] == ["message", "function_call", "reasoning"]


def test_responses_from_chat_sends_through_responses_and_returns_both_views(face: Face, gateway):
    chats = logged(gateway.db, "/v1/chat/completions")
    migrated = face.run(face.gw.responses_from_chat(**CHAT_REQUEST))
    assert isinstance(migrated.response, Response)
    # where the model stops within 6 tokens moves with the CPU's arithmetic: the claim is that both views agree
    ended = {"completed": "stop", "incomplete": "length"}
    assert ended[migrated.response.status] == migrated.chat.finish_reason
    assert isinstance(migrated.chat, ChatCompletion) and migrated.chat.text == migrated.response.text
    assert migrated.chat.usage.prompt_tokens == migrated.response.usage.input_tokens
    assert migrated.chat.usage.completion_tokens == migrated.response.usage.output_tokens
    assert migrated.request["instructions"] == "Answer in one word." and migrated.request["max_output_tokens"] == 6
    assert migrated.response.raw["instructions"] == "Answer in one word." and migrated.unmapped == []
    assert face.gw.ledger.entries()[-1].path == "/responses"
    assert logged(gateway.db, "/v1/chat/completions") == chats  # nothing went through chat


def test_responses_from_chat_validates_as_chat_before_sending(face: Face):
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.responses_from_chat(model=TEXT, messages=[{"role": "robot", "content": "hi"}]))
    assert refused.value.field == "messages[0].role" and len(face.gw.ledger) == 0
