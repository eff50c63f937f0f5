"""gwlab.wire.realtime.session: session configuration and client-event checks, without a socket."""

from __future__ import annotations

import json

import pytest

from gwlab.wire.realtime import session as rt

TOOL = {"type": "function", "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def test_defaults_are_the_specs() -> None:
    session = rt.default_session()
    assert session["temperature"] == 1.0 and session["max_output_tokens"] == "inf"
    assert session["modalities"] == ["text"] and session["voice"] == "alloy"
    assert (session["turn_detection"]["threshold"], session["turn_detection"]["prefix_padding_ms"],
            session["turn_detection"]["silence_duration_ms"]) == (0.5, 500, 1000)


def test_update_leaves_the_current_session_untouched() -> None:
    current = rt.default_session()
    updated = rt.session_update(current, {"type": "session.update", "session": {"temperature": 0.2}})
    assert updated["temperature"] == 0.2 and current["temperature"] == 1.0


def test_nested_and_top_level_fields_in_one_event_both_apply() -> None:
    updated = rt.session_update(rt.default_session(), {"type": "session.update", "voice": "echo",
                                                       "session": {"temperature": 0.3}})
    assert (updated["voice"], updated["temperature"]) == ("echo", 0.3)


def test_both_spellings_of_the_token_limit_are_one_setting() -> None:
    a = rt.update_session(rt.default_session(), {"max_output_tokens": 10})
    b = rt.update_session(rt.default_session(), {"max_response_output_tokens": 10})
    assert a["max_response_output_tokens"] == b["max_output_tokens"] == 10


def test_partial_turn_detection_fills_the_defaults_and_null_turns_it_off() -> None:
    session = rt.update_session(rt.default_session(), {"turn_detection": {"threshold": 0.9}})
    detection = session["turn_detection"]
    assert detection["silence_duration_ms"] == 1000 and detection["threshold"] == 0.9
    assert rt.update_session(session, {"turn_detection": None})["turn_detection"] is None


def test_sdk_fields_without_local_meaning_are_accepted() -> None:
    extras = {"speed": 1.2, "tracing": "auto", "input_audio_noise_reduction": None}
    assert rt.update_session(rt.default_session(), extras) == rt.default_session()


@pytest.mark.parametrize("choice", [{"type": "function", "name": "get_weather"}, "required", "none", "auto"])
def test_tool_choices_with_a_tool(choice: object) -> None:
    session = rt.update_session(rt.default_session(), {"tools": [TOOL], "tool_choice": choice})
    assert session["tool_choice"] == choice


def test_a_named_tool_choice_must_name_a_configured_tool() -> None:
    with pytest.raises(rt.InvalidEvent) as refused:
        rt.update_session(rt.default_session(), {"tools": [TOOL], "tool_choice": {"type": "function",
                                                                                 "name": "other"}})
    assert refused.value.field == "session.tool_choice.name"


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(rt.InvalidEvent, match=r"tools\[1\]\.name"):
        rt.update_session(rt.default_session(), {"tools": [TOOL, TOOL]})


def test_response_options_inherit_the_session_and_override_it() -> None:
    session = rt.update_session(rt.default_session(), {"voice": "echo", "temperature": 0.5})
    options = rt.response_options(session, {"modalities": ["text", "audio"],
                                            "max_response_output_tokens": 20})
    assert options["voice"] == "echo" and options["temperature"] == 0.5
    assert options["modalities"] == ["text", "audio"] and options["max_output_tokens"] == 20
    assert options["conversation"] == "auto"


def test_client_event_errors_carry_the_event_id() -> None:
    with pytest.raises(rt.InvalidEvent) as refused:
        rt.parse_client_event(json.dumps({"type": "conversation.item.delete", "event_id": "evt_9"}))
    assert (refused.value.event_id, refused.value.field, refused.value.code) == (
        "evt_9", "item_id", rt.MISSING_PARAMETER)


def test_items_are_normalised() -> None:
    spoken = {"type": "message", "role": "user", "content": [{"type": "input_audio", "transcript": "hi"}]}
    assert rt.item(spoken) == spoken
    call = rt.item({"type": "function_call", "call_id": "call_1", "name": "f"})
    assert call["arguments"] == ""


def test_every_client_event_type_is_known() -> None:
    documented = {"session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
                  "input_audio_buffer.clear", "conversation.item.create", "conversation.item.retrieve",
                  "conversation.item.truncate", "conversation.item.delete", "response.create",
                  "response.cancel"}
    assert set(rt.CLIENT_EVENTS) >= documented
