"""DecisionExplorer: edits validated by the client's own checks, runs on the real gateway, exports."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

pytest.importorskip("anywidget")

from gwlab import Gateway
from gwlab.widgets import DecisionExplorer
from gwlab.widgets.decision_explorer import EXAMPLE_QUESTIONS
from tests.support.models import DECIDE_MODEL


def edit(widget: Any, name: str, value: str) -> None:
    """What the browser does when a textarea changes: a trait update from the front end."""
    widget.set_state({name: value})


def test_run_shows_probabilities_as_bars_and_the_confidence(gw: Gateway) -> None:
    explorer = DecisionExplorer(gw, state="The whole site is down and nobody can pay.", model=DECIDE_MODEL)
    explorer._handle_custom_msg({"type": "run"}, [])
    assert explorer.wait(60)
    assert explorer.status == "done", explorer.error
    answers = {a["id"]: a for a in explorer.answers}
    assert set(answers) == set(EXAMPLE_QUESTIONS)
    urgent, topic = answers["urgent"], answers["topic"]
    assert [b["label"] for b in urgent["bars"]] == ["true", "false"]
    assert abs(sum(b["p"] for b in urgent["bars"]) - 1) < 1e-9
    assert {b["label"] for b in topic["bars"]} == {"billing", "outage", "feature"}
    assert abs(sum(b["p"] for b in topic["bars"]) - 1) < 1e-6 and 0 <= topic["confidence"] <= 1
    assert topic["value"] in {"billing", "outage", "feature"}
    assert explorer.usage["input_tokens"] > 0 and explorer.result is not None


def test_an_invalid_question_is_named_and_nothing_is_sent(gw: Gateway) -> None:
    explorer = DecisionExplorer(gw)
    before = len(gw.ledger.entries())
    bad = {"urgent": {"type": "noul", "instructions": "Urgent?", "criteria": {"yes": "now"}}}
    edit(explorer, "questions_json", json.dumps(bad))
    assert explorer.error.startswith("questions.urgent.criteria")
    assert explorer.run() is None and explorer.status == "idle"
    assert len(gw.ledger.entries()) == before


def test_broken_json_is_reported_with_its_position(gw: Gateway) -> None:
    explorer = DecisionExplorer(gw)
    edit(explorer, "questions_json", '{"urgent": ')
    assert explorer.error.startswith("questions: not valid JSON") and "column" in explorer.error
    edit(explorer, "questions_json", json.dumps(EXAMPLE_QUESTIONS))
    assert explorer.error == ""


def test_questions_export_as_a_dict_and_as_python_source(gw: Gateway) -> None:
    questions = {"refund": {"type": "score", "instructions": "How angry is the customer?",
                            "criteria": ["calm", "annoyed", "furious"]}}
    explorer = DecisionExplorer(gw, state={"ticket": "I want my money back"}, questions=questions)
    assert explorer.questions == questions
    assert explorer.python.startswith("QUESTIONS = ")
    assert ast.literal_eval(explorer.python.removeprefix("QUESTIONS = ")) == questions


def test_a_json_object_state_is_sent_structured_and_a_score_gets_its_legend(gw: Gateway) -> None:
    questions = {"mood": {"type": "score", "instructions": "How angry is the customer?",
                          "criteria": ["calm", "annoyed", "furious"]}}
    explorer = DecisionExplorer(gw, state={"ticket": "This is the third time! Unacceptable!"}, questions=questions)
    explorer.run()
    assert explorer.wait(60) and explorer.status == "done", explorer.error
    (mood,) = explorer.answers
    assert [b["label"] for b in mood["bars"]] == ["0 · calm", "1 · annoyed", "2 · furious"]
    assert 0 <= mood["value"] <= 2
