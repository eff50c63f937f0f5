"""Tools client: selection by decision, honest outcomes, and function-calling loops on the real gateway.

Every claim runs through the sync `Gateway` and the `AsyncGateway`, except two model loops that run
on one face each (the faces share the implementation; Gemma on two busy cores is slow). The loops use
the local Gemma model with `tool_choice` "required", so the first answer is a real tool call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gwlab.client.tools import Call, ToolRun, tool_calls_of
from gwlab.errors import InvalidRequest
from gwlab.wire.chat import ChatCompletion
from gwlab.wire.responses import Response
from tests.support.faces import Face, logged
from tests.support.models import DECIDE_MODEL, TEXT_MODEL

DECIDE = DECIDE_MODEL
TEXT = TEXT_MODEL
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather forecast and temperature for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False}}}
EMAIL = {"type": "function", "function": {
    "name": "send_email", "description": "Send an email message to a recipient address",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                   "required": ["to", "body"]}}}
REFUND = {"type": "function", "name": "refund_payment",
          "description": "Refund a customer's duplicate payment",
          "parameters": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}},
                         "required": ["amount"]}}  # the flat responses shape: both shapes are read
TOOLS = [WEATHER, EMAIL, REFUND]


class Recorder:
    """Functions that note their calls; `boom` raises, `forecast_async` is a coroutine function."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def forecast(self, city: str) -> dict[str, Any]:
        self.calls.append(("get_weather", {"city": city}))
        return {"city": city, "temperature_c": 18, "sky": "sunny"}

    async def forecast_async(self, city: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.forecast(city)

    def boom(self, **arguments: Any) -> str:
        self.calls.append(("boom", arguments))
        raise RuntimeError("the mail server is down")


# --- selection ----------------------------------------------------------------------------------------


def test_select_tool_picks_the_obvious_tool_and_never_calls_one(face: Face, gateway):
    chats = logged(gateway.db, "/v1/chat/completions")
    selection = face.run(face.gw.tools.select_tool(TOOLS, "What's the weather like in Paris today?",
                                                   model=DECIDE))
    assert selection.name == "get_weather"
    assert set(selection.probabilities) == {"get_weather", "send_email", "refund_payment", "none"}
    assert selection.probabilities["get_weather"] == max(selection.probabilities.values())
    assert 0.0 <= selection.confidence <= 1.0
    assert "tool_calls" not in json.dumps(selection.raw.raw)  # an action name, nothing executed
    assert face.gw.ledger.entries()[-1].path == "/decisions"
    assert logged(gateway.db, "/v1/chat/completions") == chats


def test_select_tool_without_the_none_option_offers_only_the_tools(face: Face):
    selection = face.run(face.gw.tools.select_tool(TOOLS, "Please refund my duplicate payment of 20 euros",
                                                   model=DECIDE, allow_none=False,
                                                   instructions="Which action handles this request?"))
    assert selection.name == "refund_payment"
    assert set(selection.probabilities) == {"get_weather", "send_email", "refund_payment"}


def test_select_tool_refuses_a_single_tool_without_the_none_option_before_sending(face: Face):
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.tools.select_tool([WEATHER], "weather?", model=DECIDE, allow_none=False))
    assert refused.value.field == "tools" and len(face.gw.ledger) == 0


# --- running calls --------------------------------------------------------------------------------------


def chat_call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def test_arguments_failing_the_schema_are_a_failure_and_the_function_is_not_called(face: Face):
    tools = Recorder()
    bad = [chat_call("get_weather", {"town": "Paris"}, "call_a"),
           chat_call("get_weather", "{not json", "call_b"), chat_call("get_weather", {"city": 7}, "call_c")]
    outcomes = face.run(face.gw.tools.run(bad, {"get_weather": tools.forecast}, TOOLS))
    assert [o.ok for o in outcomes] == [False, False, False] and tools.calls == []
    assert "arguments" in outcomes[0].error and "city" in outcomes[0].error
    assert "not valid JSON" in outcomes[1].error and "arguments.city" in outcomes[2].error
    assert all(json.loads(o.content) == {"error": o.error} for o in outcomes)  # never read as a result


def test_a_tool_that_raises_is_a_failure_outcome_not_a_result(face: Face):
    tools = Recorder()
    call = chat_call("send_email", {"to": "ops@example.com", "body": "hi"})
    [outcome] = face.run(face.gw.tools.run([call], {"send_email": tools.boom}, TOOLS))
    assert not outcome.ok and outcome.output == ""
    assert outcome.error == "RuntimeError: the mail server is down"
    assert tools.calls == [("boom", {"to": "ops@example.com", "body": "hi"})]
    assert face.gw.tools is not None and len(face.gw.ledger) == 0  # tools run locally: no request


def test_async_functions_are_awaited_and_results_sent_as_json(face: Face):
    tools = Recorder()
    item = {"type": "function_call", "call_id": "call_9", "name": "get_weather",
            "arguments": '{"city": "Oslo"}'}
    [outcome] = face.run(face.gw.tools.run([item], {"get_weather": tools.forecast_async}, TOOLS))
    assert outcome.ok and outcome.call_id == "call_9"
    assert json.loads(outcome.output) == {"city": "Oslo", "temperature_c": 18, "sky": "sunny"}


def test_unknown_tools_missing_functions_and_unserialisable_results_are_failures(face: Face):
    calls = [chat_call("launch_rocket", {}, "c1"), chat_call("send_email", {"to": "a", "body": "b"}, "c2"),
             chat_call("get_weather", {"city": "Rome"}, "c3")]
    outcomes = face.run(face.gw.tools.run(calls, {"get_weather": lambda city: {city}}, TOOLS))
    assert [o.ok for o in outcomes] == [False, False, False]
    assert "unknown tool 'launch_rocket'" in outcomes[0].error
    assert "no function" in outcomes[1].error and "JSON" in outcomes[2].error


def test_calls_are_read_from_chat_and_responses_shapes_alike():
    chat_body = {"choices": [{"message": {"role": "assistant", "content": None,
                                          "tool_calls": [chat_call("get_weather", {"city": "Oslo"})]}}]}
    responses_body = {"output": [{"type": "reasoning", "summary": []},
                                 {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                                  "arguments": '{"city": "Oslo"}'}]}
    expected = [Call("call_1", "get_weather", '{"city": "Oslo"}')]
    assert tool_calls_of(chat_body) == tool_calls_of(responses_body) == expected
    typed = ChatCompletion.from_wire(chat_body), Response.from_wire(responses_body)
    assert tool_calls_of(typed[0]) == tool_calls_of(typed[1]) == expected
    assert tool_calls_of({"output": [{"type": "message", "content": []}]}) == []


def test_a_typed_completions_custom_tool_call_is_skipped_not_read_as_none():
    """mypy found it: a typed completion's non-function call (a custom tool) became None in the list."""
    custom = {"id": "call_2", "type": "custom", "custom": {"name": "grammar", "input": "x"}}
    body = {"choices": [{"message": {"role": "assistant", "content": None,
                                     "tool_calls": [custom, chat_call("get_weather", {"city": "Oslo"})]}}]}
    assert tool_calls_of(ChatCompletion.from_wire(body)) == [Call("call_1", "get_weather", '{"city": "Oslo"}')]


# --- loops with the real local model ---------------------------------------------------------------------


def test_chat_with_tools_round_trip_with_a_real_tool_call(face: Face):
    tools = Recorder()
    run: ToolRun = face.run(face.gw.tools.chat_with_tools(
        "What is the weather in Paris?", [WEATHER], {"get_weather": tools.forecast}, model=TEXT,
        tool_choice="required", max_completion_tokens=16, temperature=0))
    assert run.is_complete and len(run.results) == 2 and run.pending == []
    assert [name for name, _ in tools.calls] == ["get_weather"] and isinstance(tools.calls[0][1]["city"], str)
    [outcome] = run.outcomes
    assert outcome.ok and outcome.name == "get_weather"
    roles = [message["role"] for message in run.history]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert run.history[1]["tool_calls"][0]["id"] == run.history[2]["tool_call_id"] == outcome.call_id
    assert run.results[0].finish_reason == "tool_calls" and not run.results[1].tool_calls
    assert run.text == run.results[1].text and run.text


@pytest.mark.parametrize("face", ["async"], indirect=True)
def test_respond_with_tools_sends_only_new_items_with_previous_response_id_and_failures_as_errors(face: Face):
    tools = Recorder()
    run = face.run(face.gw.tools.respond_with_tools(
        "What is the weather in Oslo?", [WEATHER], {"get_weather": tools.boom}, model=TEXT,
        instructions="You are a helpful assistant.", tool_choice="required", max_output_tokens=16,
        temperature=0))
    first, second = run.results
    assert isinstance(first, Response) and first.tool_calls and second.previous_response_id == first.id
    [outcome] = run.outcomes
    assert not outcome.ok and outcome.error == "RuntimeError: the mail server is down"
    assert len(tools.calls) == 1
    # migration rule 3: the second request carried only the function_call_output, not the history
    assert run.history[1:] == [{"type": "function_call_output", "call_id": outcome.call_id,
                                "output": json.dumps({"error": outcome.error})}]
    assert second.raw.get("instructions") == "You are a helpful assistant."  # rule 2: sent again


@pytest.mark.parametrize("face", ["sync"], indirect=True)
def test_max_rounds_leaves_the_last_calls_pending_and_unrun(face: Face):
    tools = Recorder()
    run = face.run(face.gw.tools.chat_with_tools(
        [{"role": "user", "content": "Weather in Rome?"}], [WEATHER], {"get_weather": tools.forecast},
        model=TEXT, tool_choice="required", max_rounds=1, max_completion_tokens=16))
    assert not run.is_complete and len(run.results) == 1 and tools.calls == [] and run.outcomes == []
    assert [call.name for call in run.pending] == ["get_weather"]


def test_the_responses_loop_refuses_store_false_before_sending(face: Face):
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.tools.respond_with_tools("hi", [WEATHER], {}, model=TEXT, store=False))
    assert refused.value.field == "store" and len(face.gw.ledger) == 0
