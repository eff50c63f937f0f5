"""Labeller: a person labels a plan's rows one at a time, by click or key, and watches the estimate move."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import pandas as pd
import traitlets

from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labelling import LabelSession
from gwlab.widgets._esm import esm_of

__all__ = ["Labeller"]

_MAX_KEYS = 9  # options 1-9 have a number key; more are clicked


class Labeller(anywidget.AnyWidget):
    """The planned rows of a `gwlab.LabelSession`, one at a time, with the question and its options.

    A click on an option, or its number key (1-9; Backspace or the left arrow goes back one row), stores
    the label in the session's SQLite store before the next row shows, so a kernel restart loses none: a
    new session on the same store resumes at the first row without a label. The estimate and its
    interval (`gwlab.estimate` over the labels so far, with the session's two-phase probabilities) are
    recomputed after every label. Nothing here talks to a gateway: no key is near the widget.

    Parameters
    ----------
    session : gwlab.LabelSession
        The frame, the plan, the question, the store and the estimate's settings.
    """

    _esm = esm_of(__file__)

    question = traitlets.Unicode("").tag(sync=True)  # the question's instructions
    options = traitlets.List(traitlets.Dict()).tag(sync=True)  # key, text, hotkey
    row = traitlets.Unicode("").tag(sync=True)  # the row id shown, as text ("" when every row is labelled)
    text = traitlets.Unicode("").tag(sync=True)
    given = traitlets.Unicode("").tag(sync=True)  # the label the shown row already has (after going back)
    done = traitlets.Int(0).tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    estimate = traitlets.List(traitlets.Dict()).tag(sync=True)  # one line per (slice, answer)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, session: LabelSession) -> None:
        if not isinstance(session, LabelSession):
            raise InvalidRequest("session", f"a gwlab.LabelSession; got {type(session).__name__}")
        choices = list(session.choices.items())
        super().__init__(question=str(session.spec.get("instructions", session.question)),
                         options=[{"key": key, "text": text, "hotkey": str(i + 1) if i < _MAX_KEYS else ""}
                                  for i, (key, text) in enumerate(choices)])
        self.session = session
        self.on_msg(self._on_front_end)
        self._show()

    def __repr__(self) -> str:
        return f"Labeller({self.session!r})"

    # -- notebook API -----------------------------------------------------------------------------
    def answer(self, key: str) -> None:
        """Label the row shown with option `key` (what a click or its number key does)."""
        self._apply({"type": "answer", "key": key, "row": self.row})

    def back(self) -> None:
        """Show the previous row again, to change its label."""
        self._apply({"type": "back"})

    # -- the front end's messages -----------------------------------------------------------------
    def _on_front_end(self, _widget: Any, content: Mapping[str, Any], _buffers: Sequence[bytes]) -> None:
        self._apply(content)

    def _apply(self, content: Mapping[str, Any]) -> None:
        try:
            if content.get("type") == "answer":
                if str(content.get("row")) != self.row:  # a click on a row already answered (double click)
                    return
                self.session.record(str(content.get("key")))
            elif content.get("type") == "back":
                self.session.back()
            self.error = ""
        except InvalidRequest as exc:
            self.error = str(exc)
        self._show()

    def _show(self) -> None:
        row = self.session.current
        done, total = self.session.progress
        given = None if row is None else self.session.label_of(row)
        with self.hold_sync():
            self.row = "" if row is None else str(row)
            self.text = "" if row is None else self.session.text(row)
            self.given = "" if given is None else str(given)
            self.done, self.total = done, total
            try:
                self.estimate = _estimate_lines(self.session)
            except Exception as exc:  # shown in the panel, not lost in the kernel's log; the label is stored
                self.estimate, self.error = [], f"estimate: {type(exc).__name__}: {exc}"


def _number(value: Any) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.3f}"


def _estimate_lines(session: LabelSession) -> list[dict[str, Any]]:
    """The estimate table as display lines: the estimate and its interval beside the labelled-only one."""
    table = session.estimate()
    by = session.options.by
    lines = []
    for _, r in table.iterrows():
        name = " · ".join([*([str(r[by])] if by else []), f"{session.question} = {r['answer']}"])
        text = (f"{name}: {_number(r['estimate'])} [{_number(r['low'])}, {_number(r['high'])}] from "
                f"{int(r['labelled'])} labels and {int(r['rows'])} model answers; labelled only "
                f"{_number(r['labelled_only'])} [{_number(r['labelled_low'])}, {_number(r['labelled_high'])}]")
        lines.append({"name": name, "text": text, **{k: None if pd.isna(r[k]) else float(r[k])
                                                    for k in ("estimate", "low", "high", "labelled")}})
    return lines
