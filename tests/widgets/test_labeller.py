"""Labeller, the kernel side: the front end's answer message stores the label before the next row shows,
the estimate line changes with it, a stale or unknown answer changes nothing, Back reopens a row, and a
new widget on the same store (a kernel restart) resumes where the last one stopped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("anywidget")

import gwlab
from gwlab.widgets import Labeller
from tests.support.widget_state import SECRET_NAMES

REFUND = {"refund": {"type": "noul", "instructions": "Is the customer asking for money back?",
                     "criteria": {"true": "asks for a refund", "false": "anything else"}}}


def _session(store: Path, **options) -> gwlab.LabelSession:
    rng = np.random.default_rng(0)
    truth = rng.random(200) < 0.3
    frame = pd.DataFrame({"text": [f"Message number {i}" for i in range(200)],
                          "refund__noul": np.clip(np.where(truth, 0.7, 0.25) + rng.normal(0, 0.1, 200), 0, 1)},
                         index=pd.RangeIndex(200, name="id"))
    plan = gwlab.label_plan(frame, "refund", budget=20, seed=5)
    return gwlab.LabelSession(frame, plan, REFUND, prob="refund", store=store, options=gwlab.SessionOptions(**options))


def front_end(widget: Labeller, content: dict) -> None:
    """What the browser does on a click or a key: a custom message to the kernel."""
    widget._handle_custom_msg(content, [])


def test_an_answer_is_stored_before_the_next_row_shows_and_the_estimate_moves(tmp_path: Path) -> None:
    widget = Labeller(_session(tmp_path / "labels.sqlite"))
    assert widget.question.startswith("Is the customer") and [o["key"] for o in widget.options] == ["true", "false"]
    assert [o["hotkey"] for o in widget.options] == ["1", "2"]
    first, shown = widget.row, widget.text
    assert shown.startswith("Message number") and widget.done == 0 and widget.total >= 10
    before = widget.estimate[0]["text"]
    front_end(widget, {"type": "answer", "key": "true", "row": first})
    assert gwlab.LabelStore(tmp_path / "labels.sqlite").labels("refund").to_dict() == {int(first): "true"}
    assert widget.row != first and widget.done == 1
    front_end(widget, {"type": "answer", "key": "false", "row": widget.row})
    assert widget.done == 2 and widget.estimate[0]["text"] != before
    assert widget.estimate[0]["labelled"] == 2 and "2 labels" in widget.estimate[0]["text"]


def test_a_stale_or_unknown_answer_changes_nothing_and_says_why(tmp_path: Path) -> None:
    widget = Labeller(_session(tmp_path / "labels.sqlite"))
    first = widget.row
    front_end(widget, {"type": "answer", "key": "true", "row": first})
    front_end(widget, {"type": "answer", "key": "true", "row": first})  # a double click lands on the old row
    assert widget.done == 1
    front_end(widget, {"type": "answer", "key": "maybe", "row": widget.row})
    assert widget.error.startswith("label") and widget.done == 1
    widget.answer("false")
    assert widget.error == "" and widget.done == 2


def test_back_reopens_the_previous_row_with_its_label_and_a_new_widget_resumes(tmp_path: Path) -> None:
    store = tmp_path / "labels.sqlite"
    widget = Labeller(_session(store, by=None))
    first = widget.row
    widget.answer("true")
    front_end(widget, {"type": "back"})
    assert widget.row == first and widget.given == "true"
    widget.answer("false")  # changed, then on to the next open row
    second = widget.row
    assert second != first and widget.done == 1
    restarted = Labeller(_session(store))  # a kernel restart: the same store, a new session and widget
    assert restarted.row == second and restarted.done == 1
    assert gwlab.LabelStore(store).labels("refund").to_dict() == {int(first): "false"}


def test_every_row_labelled_shows_no_row_and_the_state_holds_no_credential(tmp_path: Path) -> None:
    widget = Labeller(_session(tmp_path / "labels.sqlite", by=None))
    while widget.row:
        widget.answer("true")
    assert widget.text == "" and widget.done == widget.total
    state = json.dumps(widget.get_state(), default=repr)
    assert "labels.sqlite" not in state  # the store's path stays in the kernel too
    synced = [name for name in widget.keys if not name.startswith("_")]
    assert not [name for name in synced if SECRET_NAMES.search(name)], synced  # no credential-shaped trait


def test_an_estimate_that_fails_is_shown_in_the_panel_and_the_label_is_kept(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    widget = Labeller(_session(tmp_path / "labels.sqlite"))
    first = widget.row

    def broken() -> pd.DataFrame:  # a fault injected into the estimate
        raise ValueError("injected")

    monkeypatch.setattr(widget.session, "estimate", broken)
    widget.answer("true")
    assert widget.error == "estimate: ValueError: injected" and widget.estimate == []
    assert gwlab.LabelStore(tmp_path / "labels.sqlite").labels("refund").to_dict() == {int(first): "true"}
