"""The rules chat, responses and messages share (gwlab/wire/generation.py), read in each family's spelling."""

from __future__ import annotations

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import chat, generation, messages, responses
from gwlab.wire.tools import ToolSpec

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
TIME = {"type": "object", "properties": {}}


def _chat(**body):
    return chat.parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], **body})


def _responses(**body):
    return responses.parse_request({"model": "m", "input": "hi", **body})


def _messages(**body):
    return messages.parse_request({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                                   **body})


CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": s}}
              for n, s in (("weather", WEATHER), ("time", TIME))]
FLAT_TOOLS = [{"type": "function", "name": n, "parameters": s} for n, s in (("weather", WEATHER), ("time", TIME))]
CUSTOM_TOOLS = [{"name": n, "input_schema": s} for n, s in (("weather", WEATHER), ("time", TIME))]


@pytest.mark.parametrize("parsed", [_chat(tools=CHAT_TOOLS), _responses(tools=FLAT_TOOLS),
                                    _messages(tools=CUSTOM_TOOLS)], ids=["chat", "responses", "messages"])
def test_each_family_reads_its_tool_shape_into_one_normal_form(parsed) -> None:
    assert [t.name for t in parsed.tools] == ["weather", "time"]
    assert all(isinstance(t, ToolSpec) for t in parsed.tools) and parsed.tools[0].parameters == WEATHER
    assert parsed.tool_choice == generation.ToolChoice("auto")


@pytest.mark.parametrize("parsed", [_chat(), _responses(), _messages()], ids=["chat", "responses", "messages"])
def test_unset_tool_choice_without_tools_is_none(parsed) -> None:
    assert parsed.tool_choice.mode == "none" and parsed.tools == []


@pytest.mark.parametrize(("parsed", "expected"), [
    (_chat(tools=CHAT_TOOLS, tool_choice="required"), generation.ToolChoice("required")),
    (_messages(tools=CUSTOM_TOOLS, tool_choice={"type": "any"}), generation.ToolChoice("required")),
    (_chat(tools=CHAT_TOOLS, tool_choice={"type": "function", "function": {"name": "time"}}),
     generation.ToolChoice("required", "time")),
    (_responses(tools=FLAT_TOOLS, tool_choice={"type": "function", "name": "time"}),
     generation.ToolChoice("required", "time")),
    (_messages(tools=CUSTOM_TOOLS, tool_choice={"type": "tool", "name": "time"}),
     generation.ToolChoice("required", "time")),
], ids=["chat-required", "messages-any", "chat-named", "responses-named", "messages-named"])
def test_the_three_spellings_of_a_tool_choice_mean_the_same(parsed, expected) -> None:
    assert parsed.tool_choice == expected


def test_allowed_tools_offer_only_the_listed_functions_in_chat_and_responses() -> None:
    nested = _chat(tools=CHAT_TOOLS, tool_choice={"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "time"}}]}})
    flat = _responses(tools=FLAT_TOOLS, tool_choice={"type": "allowed_tools", "mode": "required",
                                                      "tools": [{"type": "function", "name": "time"}]})
    for parsed in (nested, flat):
        assert parsed.tool_choice == generation.ToolChoice("required", allowed=("time",))
        assert [t.name for t in parsed.tool_choice.offered(parsed.tools)] == ["time"]


def test_tools_of_other_types_pass_the_validator_as_sent() -> None:
    # the protocols have hosted and server tools: whether a gateway runs them is the gateway's business
    search = {"type": "web_search"}
    parsed = _responses(tools=[search, *FLAT_TOOLS], tool_choice={"type": "web_search_preview"})
    assert parsed.tools[0] == search and parsed.tool_choice == generation.ToolChoice("hosted", "web_search_preview")
    server = {"type": "web_search_20250305", "name": "web_search"}
    assert _messages(tools=[server]).tools == [server]
    custom = {"type": "custom", "custom": {"name": "grammar"}}
    assert _chat(tools=[custom]).tools == [custom]


def test_messages_refuses_sampling_under_the_2026_version_only() -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "top_k": 3}
    assert messages.parse_request(body).body["top_k"] == 3
    with pytest.raises(InvalidRequest) as info:
        messages.parse_request(body, messages.NO_SAMPLING_VERSION)
    assert info.value.field == "top_k"


def test_sampling_ranges_differ_by_family_as_the_protocols_do() -> None:
    assert _chat(temperature=1.5).sampling == {"temperature": 1.5}
    with pytest.raises(InvalidRequest, match="from 0 to 1"):
        _messages(temperature=1.5)


def test_the_cap_is_either_chat_name_and_both_with_one_value() -> None:
    assert _chat(max_tokens=7).max_tokens == 7
    assert _chat(max_completion_tokens=7, max_tokens=7).max_tokens == 7
    assert _responses(max_output_tokens=9).max_tokens == 9 and _messages().max_tokens == 5
