"""gwlab.wire.migration: the spec's chat → responses table applied to requests and results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gwlab.errors import InvalidRequest
from gwlab.wire import migration
from gwlab.wire.migration import chat_request_to_responses, chat_result_to_responses, responses_result_to_chat

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

CHAT_REQUEST = {
    "model": "gw-echo-1",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_w1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp_c": 4}'},
    ],
    "tools": [WEATHER_TOOL],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "max_completion_tokens": 64,
    "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"},
                                                               "strict": True}},
    "web_search_options": {"search_context_size": "low",
                           "user_location": {"type": "approximate", "approximate": {"city": "Oslo"}}},
    "stream": True,
    "stream_options": {"include_usage": True},
    "temperature": 0.2,
    "seed": 7,
}

# protocols.md §3.2 plus a function call, a reasoning item and an unknown item
RESPONSE = {
    "id": "resp_gw001", "object": "response", "created_at": 1767225600, "status": "completed",
    "model": "gw-echo-1", "error": None, "incomplete_details": None,
    "output": [
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
        {"id": "msg_gw001", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hi there", "annotations": [], "logprobs": []}]},
        {"id": "fc_1", "type": "function_call", "call_id": "call_gw9", "name": "get_weather",
         "arguments": '{"city":"Oslo"}', "status": "completed"},
        {"id": "x_1", "type": "hologram_call", "status": "completed"},
    ],
    "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
              "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15},
}


def test_migration_table_holds_exactly_the_spec_rows() -> None:
    assert len(migration.MIGRATION_TABLE) == 14
    assert migration.MIGRATION_TABLE[0] == ("POST /chat/completions", "POST /responses")
    assert ("usage.prompt_tokens", "usage.input_tokens") in migration.MIGRATION_TABLE
    assert migration.MIGRATION_TABLE[-1] == ("web_search_options", "a web search tool in tools")


# --- requests ---------------------------------------------------------------------------------------------


def test_chat_request_becomes_the_equivalent_responses_request() -> None:
    assert chat_request_to_responses(CHAT_REQUEST) == {
        "model": "gw-echo-1",
        "instructions": "Be brief.\n\nUse metric units.",
        "input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "function_call", "call_id": "call_w1", "name": "get_weather",
             "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "call_w1", "output": '{"temp_c": 4}'},
        ],
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Weather for a city",
             "parameters": WEATHER_TOOL["function"]["parameters"], "strict": None},  # required (bool|null)
            {"type": "web_search", "search_context_size": "low",
             "user_location": {"type": "approximate", "city": "Oslo"}},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 64,
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"},
                            "strict": True}},
        "stream": True,
        "temperature": 0.2,
        "seed": 7,
    }


def test_unmapped_fields_are_passed_through_and_listed() -> None:
    request = {**CHAT_REQUEST, "messages": [{"role": "user", "content": "hi", "name": "ann"}], "n": 2}
    assert chat_request_to_responses(request)["n"] == 2
    assert migration.unmapped_request_fields(request) == ["seed", "n", "stream_options.include_usage",
                                                          "messages.0.name"]


def test_system_message_after_the_conversation_started_stays_in_place() -> None:
    converted = chat_request_to_responses({"messages": [
        {"role": "user", "content": "hi"}, {"role": "developer", "content": "now answer in French"}]})
    assert "instructions" not in converted
    assert converted["input"][1] == {"role": "developer", "content": "now answer in French"}


def test_max_completion_tokens_wins_over_the_older_max_tokens() -> None:
    assert chat_request_to_responses({"max_completion_tokens": 5, "max_tokens": 9})["max_output_tokens"] == 5
    assert chat_request_to_responses({"max_tokens": 9})["max_output_tokens"] == 9


def test_json_object_response_format_and_verbosity_share_text() -> None:
    converted = chat_request_to_responses({"response_format": {"type": "json_object"}, "verbosity": "low",
                                           "reasoning_effort": "minimal"})
    assert converted == {"text": {"format": {"type": "json_object"}, "verbosity": "low"},
                         "reasoning": {"effort": "minimal"}}


def test_user_image_and_text_parts_become_input_parts() -> None:
    converted = chat_request_to_responses({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}]}]})
    assert converted["input"][0]["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]


def test_allowed_tools_choice_is_flattened() -> None:
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "get_weather"}}]}}
    assert chat_request_to_responses({"tool_choice": choice})["tool_choice"] == {
        "type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]}


def test_assistant_refusal_is_replayed_as_a_refusal_part() -> None:
    converted = chat_request_to_responses({"messages": [
        {"role": "assistant", "content": "Sorry.", "refusal": "I can't help with that."}]})
    assert converted["input"] == [{"role": "assistant", "content": [
        {"type": "output_text", "text": "Sorry."},
        {"type": "refusal", "refusal": "I can't help with that."}]}]


def test_tool_message_without_tool_call_id_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        chat_request_to_responses({"messages": [{"role": "tool", "content": "4 C"}]})
    assert info.value.field == "messages.0.tool_call_id"


def test_tool_with_an_invalid_name_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        chat_request_to_responses({"tools": [{"type": "function", "function": {"name": "no spaces"}}]})
    assert info.value.field == "tools.0.function.name"


# --- results --------------------------------------------------------------------------------------------


def test_responses_result_is_presented_as_a_chat_completion() -> None:
    chat = responses_result_to_chat(RESPONSE)
    assert chat["choices"] == [{"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Hi there", "refusal": None,
        "tool_calls": [{"id": "call_gw9", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]}}]
    assert chat["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                             "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}
    assert (chat["id"], chat["object"], chat["created"]) == ("resp_gw001", "chat.completion", 1767225600)


def test_unknown_and_reasoning_items_are_kept_not_dropped() -> None:
    kept = responses_result_to_chat(RESPONSE)["gwlab_unmapped_items"]
    assert [item["id"] for item in kept] == ["rs_1", "x_1"]


def test_first_output_item_need_not_be_text() -> None:
    response = {**RESPONSE, "output": [RESPONSE["output"][2], RESPONSE["output"][1]]}
    assert responses_result_to_chat(response)["choices"][0]["message"]["content"] == "Hi there"


@pytest.mark.parametrize(("details", "finish"), [({"reason": "max_output_tokens"}, "length"),
                                                 ({"reason": "content_filter"}, "content_filter")])
def test_incomplete_response_maps_to_its_finish_reason(details: dict[str, Any], finish: str) -> None:
    response = {**RESPONSE, "status": "incomplete", "incomplete_details": details}
    assert responses_result_to_chat(response)["choices"][0]["finish_reason"] == finish


def test_completed_text_answer_finishes_with_stop() -> None:
    response = {**RESPONSE, "output": [RESPONSE["output"][1]]}
    assert responses_result_to_chat(response)["choices"][0]["finish_reason"] == "stop"


def test_failed_response_has_no_finish_reason_and_keeps_its_error() -> None:
    error = {"code": "server_error", "message": "boom"}
    chat = responses_result_to_chat({**RESPONSE, "status": "failed", "error": error})
    assert chat["choices"][0]["finish_reason"] is None
    assert chat["gwlab_unmapped_status"] == {"status": "failed", "incomplete_details": None, "error": error}


def test_citations_are_nested_and_shifted_into_the_joined_content() -> None:
    citation = {"type": "url_citation", "start_index": 0, "end_index": 4, "url": "https://a.example",
                "title": "A"}
    response = {"status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "One. "}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Two.", "annotations": [citation]}]}]}
    message = responses_result_to_chat(response)["choices"][0]["message"]
    assert message["content"] == "One. Two."
    assert message["annotations"] == [{"type": "url_citation", "url_citation": {
        "start_index": 5, "end_index": 9, "url": "https://a.example", "title": "A"}}]


def test_chat_result_is_presented_as_a_responses_object() -> None:
    chat = {"id": "chatcmpl-gw1", "object": "chat.completion", "created": 1767225600, "model": "gw-echo-1",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "Partial", "refusal": None}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51}}
    response = chat_result_to_responses(chat)
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"] == [{"id": "msg_chatcmpl-gw1", "type": "message", "role": "assistant",
                                   "status": "incomplete",
                                   "content": [{"type": "output_text", "text": "Partial",
                                                "annotations": []}]}]
    assert response["usage"] == {"input_tokens": 42, "output_tokens": 9, "total_tokens": 51}


def test_unmapped_items_return_when_presented_the_other_way() -> None:
    again = chat_result_to_responses(responses_result_to_chat(RESPONSE))
    assert {item["id"] for item in again["output"]} >= {"rs_1", "x_1"}


# --- properties -----------------------------------------------------------------------------------------

texts = st.text(max_size=20)
call_ids = st.from_regex(r"call_[a-z0-9_]{1,10}", fullmatch=True)
names = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
arguments = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
    json.dumps)
tool_calls = st.lists(st.fixed_dictionaries({"id": call_ids, "type": st.just("function"),
                                             "function": st.fixed_dictionaries({"name": names,
                                                                                "arguments": arguments})}),
                      max_size=3)
contents = texts | st.lists(texts.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=3)
chat_messages = st.lists(st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer"]), "content": contents}),
    st.fixed_dictionaries({"role": st.just("user"), "content": contents}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.none() | texts},
                          optional={"tool_calls": tool_calls}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": call_ids, "content": texts}),
), max_size=8)


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content)
    return content or ""


@settings(max_examples=300)
@given(chat_messages)
def test_chat_to_responses_preserves_every_text_and_every_tool_call(messages: list[dict[str, Any]]) -> None:
    converted = chat_request_to_responses({"model": "m", "messages": messages})
    leading = 0
    while leading < len(messages) and messages[leading]["role"] in ("system", "developer"):
        leading += 1
    instructions = "\n\n".join(_text_of(m["content"]) for m in messages[:leading])
    assert converted.get("instructions", "") == instructions
    sent_texts = [_text_of(m["content"]) for m in messages[leading:]]
    got_texts = [_text_of(item.get("content", item.get("output"))) for item in converted["input"]
                 if item.get("type") != "function_call"]
    assert [t for t in got_texts if t] == [t for t in sent_texts if t]
    sent_calls = [(c["id"], c["function"]["arguments"]) for m in messages for c in m.get("tool_calls", [])]
    got_calls = [(i["call_id"], i["arguments"]) for i in converted["input"]
                 if i.get("type") == "function_call"]
    assert got_calls == sent_calls
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [
        i["call_id"] for i in converted["input"] if i.get("type") == "function_call_output"]


counts = st.integers(min_value=0, max_value=10**6)


@st.composite
def chat_results(draw: st.DrawFn) -> dict[str, Any]:
    calls = draw(tool_calls)
    finish = draw(st.sampled_from(["tool_calls" if calls else "stop", "length", "content_filter"]))
    message: dict[str, Any] = {"role": "assistant", "content": draw(st.none() | texts),
                               "refusal": draw(st.none() | texts)}
    if calls:
        message["tool_calls"] = calls
    prompt, completion = draw(counts), draw(counts)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {"id": "chatcmpl-" + draw(names), "object": "chat.completion", "created": draw(counts),
            "model": "m", "choices": [choice], "usage": usage}


@settings(max_examples=300)
@given(chat_results())
def test_chat_result_round_trip_preserves_content_tool_calls_and_usage(chat: dict[str, Any]) -> None:
    again = responses_result_to_chat(chat_result_to_responses(chat))
    assert again["choices"][0]["message"] == chat["choices"][0]["message"]
    assert again["choices"][0]["finish_reason"] == chat["choices"][0]["finish_reason"]
    assert again["usage"] == chat["usage"]
    assert (again["id"], again["created"], again["model"]) == (chat["id"], chat["created"], chat["model"])
