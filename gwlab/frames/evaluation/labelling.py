"""`gwlab.LabelSession`: a person labels a plan's rows one at a time into a durable store, and the estimate
over the labels so far stays valid at every step; the labelling widget (`gwlab.widgets.Labeller`) and
headless use (labels from a column or a CSV) share it.

Why a random order, not the plan's least-sure-first: `label_plan` draws rows independently with
probabilities pi (phase one). A person who stops after k of the m drawn rows has labelled the first k of
a seeded random order of them: a simple random sample of the drawn rows (phase two), so each row was
labelled with probability pi * k / m, exactly given m (two-phase sampling). The live estimate is
`gwlab.estimate(..., label_prob=)` with those probabilities, unbiased after every label
(tests/frames/evaluation/test_labelling.py simulates it; stopping early in least-sure-first order with
the plan's pi is the biased mutant). Rows labelled before the plan (pi = 1, `truth=`) count as they are.

What it does not promise: stopping *because* the interval looks narrow enough or the estimate looks
right is optional stopping, which a fixed-n interval does not survive; decide how many to label first
(`label_plan`'s planner says how many), or label the whole plan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.estimate import estimate
from gwlab.frames.evaluation.label_plan import LabelPlan
from gwlab.frames.evaluation.label_store import LabelStore
from gwlab.frames.templates import Template

__all__ = ["LabelSession", "SessionOptions", "two_phase_probabilities"]

_LABEL, _PROB = "__label__", "__label_prob__"


@dataclass(frozen=True)
class SessionOptions:
    """`show`: what the person reads per row (a template or column, as `df.gw.decide`'s state); `truth`:
    the label column the plan was made with (rows labelled before it); `by`: slices of the estimate."""

    show: str = "{text}"
    truth: str | None = None
    by: str | None = None
    seed: int = 0
    level: float = 0.95


class LabelSession:
    """Label `plan.rows` of `frame` for the one question of `questions`, into `store` (a path or a
    LabelStore); `prob` the model's answers as `gwlab.estimate` takes them.

    >>> session = gwlab.LabelSession(df, plan, {"refund": spec}, prob="refund", store="labels.sqlite")  # doctest: +SKIP
    >>> session.record("true"); session.estimate()                                                     # doctest: +SKIP
    """

    def __init__(self, frame: pd.DataFrame, plan: LabelPlan, questions: Mapping[str, Any], *, prob: Any,
                 store: LabelStore | str | os.PathLike[str], options: SessionOptions | None = None) -> None:
        self.options = options or SessionOptions()
        if len(questions) != 1:
            raise InvalidRequest("questions", "one question to label: {question id: spec}")
        (self.question, self.spec), = questions.items()
        self.choices = _options(self.question, self.spec)
        if not plan.probabilities.index.equals(frame.index):
            raise InvalidRequest("plan", "was made for another frame (its probabilities are indexed otherwise)")
        for field in ("truth", "by"):
            column = getattr(self.options, field)
            if column is not None and column not in frame.columns:
                raise InvalidRequest(field, f"unknown column {column!r}")
        self.frame, self.plan, self.prob = frame, plan, prob
        self.store = store if isinstance(store, LabelStore) else LabelStore(store)
        self._show = Template.parse(self.options.show, list(frame.columns), field="show")
        rng = np.random.default_rng(self.options.seed)
        self.order: list[Hashable] = list(plan.rows[rng.permutation(len(plan.rows))])
        self._cursor: int | None = None  # a row gone back to; None: the first without a label

    def __repr__(self) -> str:
        done, total = self.progress
        return f"LabelSession({self.question!r}: {done} of {total} planned rows labelled; {self.store!r})"

    # -- where the person is ------------------------------------------------------------------------
    def _given(self) -> pd.Series:
        return self.store.column(self.question, pd.Index(self.order, dtype=object))

    @property
    def progress(self) -> tuple[int, int]:
        """(planned rows labelled, planned rows)."""
        return int(self._given().notna().sum()), len(self.order)

    @property
    def position(self) -> int | None:
        """The place in `order` of the row to show: one gone back to, else the first without a label."""
        if self._cursor is not None:
            return self._cursor
        open_ = np.flatnonzero(self._given().isna().to_numpy())
        return int(open_[0]) if len(open_) else None

    @property
    def current(self) -> Hashable | None:
        """The row id to label now (None: every planned row has a label)."""
        at = self.position
        return None if at is None else self.order[at]

    def text(self, row: Hashable) -> str:
        """What the person reads for `row`."""
        value = self._show.render(self.frame.loc[[row]], blank="send").values[0]
        return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def label_of(self, row: Hashable) -> Any:
        return self.store.column(self.question, pd.Index([row], dtype=object)).iloc[0]

    # -- giving labels ------------------------------------------------------------------------------
    def record(self, label: Any, row: Hashable | None = None) -> None:
        """Store `label` (one of the options' keys) for `row` (default: the current one), then move on."""
        row = self.current if row is None else row
        if row is None:
            raise InvalidRequest("row", "every planned row has a label; nothing is waiting")
        key = str(label)
        if key not in self.choices:
            raise InvalidRequest("label", f"one of {list(self.choices)}; got {label!r}")
        if row not in self.frame.index:
            raise InvalidRequest("row", f"{row!r} is not a row of the frame")
        self.store.put(self.question, row, key)
        self._cursor = None

    def back(self) -> None:
        """Show the row before the current one again (its label can be changed)."""
        at = self.position
        self._cursor = max((len(self.order) if at is None else at) - 1, 0) if self.order else None

    def record_column(self, labels: pd.Series) -> int:
        """Headless: labels from a column (indexed like the frame) into the store; returns how many."""
        return self.store.record_column(self.question, labels)

    def record_csv(self, path: str | os.PathLike[str], *, row: str = "id", label: str = "label") -> int:
        """Headless: labels from a CSV (a row-id column and a label column) into the store."""
        return self.store.record_csv(self.question, path, row=row, label=label)

    # -- the estimate so far ------------------------------------------------------------------------
    def labelled_frame(self) -> pd.DataFrame:
        """The frame with the labels the design counts (`__label__`) and each row's probability of having
        one (`__label_prob__`, two-phase: pi * k / m for rows open at plan time, 1 before it)."""
        before = (self.frame[self.options.truth].notna().to_numpy() if self.options.truth
                  else np.zeros(len(self.frame), dtype=bool))
        labels = pd.Series(None, index=self.frame.index, dtype=object)
        if self.options.truth:
            labels[before] = self.frame.loc[before, self.options.truth]
        given = self._given()
        given = given[given.notna()]
        labels.loc[given.index] = given.to_numpy()
        prob = two_phase_probabilities(self.plan.probabilities.to_numpy(dtype=np.float64), before, len(given),
                                       len(self.order))
        view = self.frame.copy(deep=False)
        view[_LABEL], view[_PROB] = labels, prob
        return view

    def estimate(self) -> pd.DataFrame:
        """`gwlab.estimate` over the labels so far (its table), with the two-phase probabilities once
        planned rows have labels; before any, over the rows labelled before the plan."""
        view = self.labelled_frame()
        done, _ = self.progress
        return estimate(view, truth=_LABEL, prob=self.prob, by=self.options.by, level=self.options.level,
                        label_prob=_PROB if done else None, questions={self.question: self.spec})


def two_phase_probabilities(pi: np.ndarray, before: np.ndarray, done: int, drawn: int) -> np.ndarray:
    """Each row's probability of holding a label when `done` of the `drawn` planned rows, taken in a
    random order, are labelled: pi * done / drawn for rows open at plan time, 1 for rows labelled before."""
    share = done / drawn if drawn else 0.0
    return np.where(before, 1.0, np.asarray(pi, dtype=np.float64) * share)


def _options(question: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """The answers a person picks from, key -> what it means: a noul question's true/false, a choice's keys."""
    if not isinstance(spec, Mapping):
        raise InvalidRequest(f"questions.{question}", "a decision question spec: {type, instructions, criteria}")
    kind, criteria = spec.get("type"), spec.get("criteria") or {}
    if kind == "noul":
        return {"true": str(criteria.get("true", "yes")), "false": str(criteria.get("false", "no"))}
    if kind == "choice" and isinstance(criteria, Mapping) and criteria:
        return {str(k): str(v) for k, v in criteria.items()}
    raise InvalidRequest(f"questions.{question}.type", "a noul or choice question (with its criteria) to label")
