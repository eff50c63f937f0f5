"""Function calls over realtime: the §6.5 sequence, arguments valid under the tool's schema, and the turn
that continues from the client's function_call_output."""

from __future__ import annotations

import json

import pytest

from tests.support.realtime import connect, types

WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"type": "function", "name": "get_time", "description": "Get the current time in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}
CALL_TURN = ["conversation.item.created", "response.created", "response.output_item.added",
             "conversation.item.created"]
CALL_END = ["response.function_call_arguments.done", "response.output_item.done", "response.done",
            "rate_limits.updated"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "get_weather"}, "auto"])
async def test_function_call_turn_and_its_continuation(gateway, choice: object) -> None:
    async with connect(gateway) as rt:
        session = {"tools": [WEATHER, TIME], "tool_choice": choice}
        await rt.send({"type": "session.update", "session": session})
        await rt.until("session.updated")
        events = await rt.turn("What is the weather like in Paris today?")
        deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
        assert types(events) == CALL_TURN + [deltas[0]["type"]] * len(deltas) + CALL_END

        added = events[2]["item"]
        assert (added["type"], added["status"], added["name"], added["arguments"]) == (
            "function_call", "in_progress", "get_weather", "")
        assert added["call_id"].startswith("call_") and events[3]["item"]["id"] == added["id"]
        done = events[-4]
        assert done["call_id"] == added["call_id"]
        assert done["arguments"] == "".join(d["delta"] for d in deltas)
        assert isinstance(json.loads(done["arguments"])["city"], str)  # the grammar keeps it to the schema
        finished = events[-2]["response"]
        assert finished["status"] == "completed" and finished["output"][0]["arguments"] == done["arguments"]

        await rt.send({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": added["call_id"], "output": '{"temperature_c": 21}'}})
        await rt.send({"type": "response.create"})
        answer = await rt.until("rate_limits.updated")
        assert answer[0]["item"]["type"] == "function_call_output"
        response = answer[-2]["response"]
        # after a tool result, auto answers in words (textgen's routing rule); required would call again
        if choice == "auto":
            assert response["status"] == "completed" and response["output"][0]["type"] == "message"
        else:
            assert response["status"] == "completed"


async def test_tool_choice_none_answers_in_text(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {"tools": [WEATHER], "tool_choice": "none"}})
        await rt.until("session.updated")
        events = await rt.turn("What is the weather like in Paris today?")
    assert "response.function_call_arguments.done" not in types(events)
    assert events[-2]["response"]["output"][0]["type"] == "message"


async def test_response_level_tools_override_the_session(gateway) -> None:
    async with connect(gateway) as rt:
        events = await rt.turn("What time is it in Tokyo?", tools=[TIME], tool_choice="required")
    assert events[-2]["response"]["output"][0]["name"] == "get_time"
