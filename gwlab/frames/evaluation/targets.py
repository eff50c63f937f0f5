"""Which columns hold a question's probabilities, and its labels as class indices.

`evaluate`, `recalibrate` and the plots all start from the same step: find a question's answer columns
by the tidy names the pandas layer writes (`{q}__noul`, `{q}__p__{option}`, `{q}__choice`,
`{q}__score`) and turn labels and probabilities into one shape, an n x K probability matrix over the
question's classes plus the index of each row's true class. A noul question is the 2-class case
`[false, true]`, so every metric is written once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation.labels import (
    LabelMatch,
    class_name,
    distinct,
    match_labels,
    natural,
    read_predictions,
    synonyms,
    synonyms_for,
)

ProbSpec = str | Sequence[str] | Mapping[str, str]


@dataclass(frozen=True)
class Target:
    """One question ready to score: rows with both a label and probabilities (or a prediction)."""

    question: str
    kind: str  # noul | choice | score
    classes: list[str]  # noul: ["false", "true"]; score: ["0", "1", ...]
    index: pd.Index  # labels of the kept rows, for tables that point back at the frame
    positions: np.ndarray  # positions of the kept rows in the frame (labels may repeat)
    y: np.ndarray  # true class index per kept row (-1: a label outside `classes`)
    proba: np.ndarray | None  # n x K, rows sum to ~1; None when only predictions were given
    pred: np.ndarray  # predicted class index per kept row (-1: outside `classes`)
    n_missing: int  # rows dropped: no label, or no answer (an error row)
    columns: dict[str, str] = field(default_factory=dict)  # class -> probability column
    match: LabelMatch | None = None  # how the labels were read (mapped, shifted, unmatched)

    @property
    def n_unmatched(self) -> int:
        """Rows left out because their label matches no class (see gwlab/frames/evaluation/labels.py)."""
        return self.match.n_unmatched if self.match is not None else 0

    @property
    def confidence(self) -> np.ndarray:
        """Top-label confidence: the probability of the predicted class."""
        if self.proba is None:
            raise InvalidRequest("prob", f"question {self.question!r} has no probability columns")
        top: np.ndarray = self.proba.max(axis=1)
        return top

    @property
    def correct(self) -> np.ndarray:
        correct: np.ndarray = self.pred == self.y
        return correct


def resolve(frame: pd.DataFrame, truth: str | Mapping[str, str], prob: Any = None,
            pred: Any = None, questions: Mapping[str, Any] | None = None,
            levels_from: int | Mapping[str, int] | None = None, labels: Mapping[Any, Any] | None = None
            ) -> list[Target]:
    """Targets for `truth`: one label column (with `prob`/`pred`), or question id -> label column.

    With a mapping, `prob` and `pred` are mappings by question id too; a question given neither is
    found by its id (`{q}__noul` or `{q}__p__*`). `questions` (as given to `decide`) lets score labels
    be written as level text and fixes a pred-only question's options. `levels_from` (0 or 1, or
    per question id) is where score labels start (see labels.py); `labels` maps labels as written to
    what they mean (`labels=` synonyms, one mapping or one per question id).
    """
    if isinstance(truth, Mapping):
        probs = prob if isinstance(prob, Mapping) else {}
        preds = pred if isinstance(pred, Mapping) else {}
        for q in truth:
            if q not in probs and q not in preds:
                _require_question(frame, str(q))
        return [_target(frame, label, probs.get(q, None if q in preds else q), preds.get(q), questions,
                        levels_from, labels)
                for q, label in truth.items()]
    if prob is None and pred is None:
        raise InvalidRequest("prob", "give prob= (probability columns or a question id) or pred= (answers)")
    return [_target(frame, truth, prob, pred, questions, levels_from, labels)]


def _require_question(frame: pd.DataFrame, question: str) -> None:
    """A question of truth={...} given no prob=/pred= is found by its id; when it is not, say so naming
    `truth`, the argument the user passed (not `prob`, which they did not)."""
    columns = [str(c) for c in frame.columns]
    if f"{question}__noul" in columns or any(c.startswith(f"{question}__p__") for c in columns):
        return
    found = sorted({c.split("__", 1)[0] for c in columns if "__noul" in c or "__p__" in c})
    raise InvalidRequest("truth", f"question {question!r} has no answer columns in the frame ({question}__noul "
                                  f"or {question}__p__<option>); the frame answers {found or 'no question'}; "
                                  "give prob= or pred= to name the columns")


def _column(frame: pd.DataFrame, name: str, field_name: str) -> pd.Series:
    if name not in frame.columns:
        shown = ", ".join(map(str, list(frame.columns)[:12]))
        raise InvalidRequest(field_name, f"unknown column {name!r}; the frame has {shown}")
    return frame[name]


def probability_columns(frame: pd.DataFrame, prob: ProbSpec) -> tuple[str, str, dict[str, str]]:
    """(question, kind, class -> column) for a probability spec over `frame`."""
    if isinstance(prob, Mapping):
        columns = {str(k): v for k, v in prob.items()}
        for col in columns.values():
            _column(frame, col, "prob")
        kind = "noul" if set(columns) == {"false", "true"} else "choice"
        return "prob", kind, columns
    if not isinstance(prob, str):
        cols = list(prob)
        for col in cols:
            _column(frame, col, "prob")
        if not all(tidy.is_probability(c) for c in cols):
            raise InvalidRequest("prob", "probability columns must be named {question}__p__{option}")
        question = tidy.split_probability(cols[0])[0]
        return question, _kind_of(frame, question, cols), {tidy.split_probability(c)[1]: c for c in cols}
    noul = tidy.column(prob, tidy.NOUL)
    if tidy.question_of(prob, tidy.NOUL) is not None or (
            prob in frame.columns and noul not in frame.columns
            and not any(str(c).startswith(tidy.probability_prefix(prob)) for c in frame.columns)):
        _column(frame, prob, "prob")
        return tidy.question_of(prob, tidy.NOUL) or prob, "noul", {"true": prob}
    if noul in frame.columns:
        return prob, "noul", {"true": noul}
    options = tidy.options_of(prob, frame.columns)  # not the spreads `repeats=` adds ({q}__p__{option}__std)
    if not options:
        raise InvalidRequest("prob", f"no column {prob!r}, {prob}__noul or {prob}__p__<option> in the frame")
    cols = [tidy.probability(prob, option) for option in options]
    return prob, _kind_of(frame, prob, cols), dict(zip(options, cols, strict=True))


def _kind_of(frame: pd.DataFrame, question: str, cols: list[str]) -> str:
    if tidy.column(question, tidy.SCORE) in frame.columns:
        return "score"
    if tidy.column(question, tidy.CHOICE) in frame.columns:
        return "choice"
    levels = [tidy.split_probability(c)[1] for c in cols]
    return "score" if levels == [str(i) for i in range(len(levels))] else "choice"


def _target(frame: pd.DataFrame, truth: str, prob: ProbSpec | None, pred: str | None,
            questions: Mapping[str, Any] | None = None,
            levels_from: int | Mapping[str, int] | None = None, mapping: Mapping[Any, Any] | None = None
            ) -> Target:
    labels = _column(frame, truth, "truth")
    proba_frame: pd.DataFrame | None = None
    columns: dict[str, str] = {}
    if prob is not None:
        question, kind, columns = probability_columns(frame, prob)
        if kind == "noul":
            p_true = pd.to_numeric(frame[columns["true"]], errors="coerce")
            proba_frame = pd.DataFrame({"false": 1.0 - p_true, "true": p_true})
        else:
            proba_frame = frame[list(columns.values())].apply(pd.to_numeric, errors="coerce")
            proba_frame.columns = list(columns)
        classes = list(proba_frame.columns)
    else:
        assert pred is not None
        predictions = _column(frame, pred, "pred")
        question = pred.rsplit(tidy.SEP, 1)[0] if tidy.SEP in pred else pred
        kind = ("score" if tidy.question_of(pred, tidy.SCORE, tidy.LEVEL) is not None
                else "noul" if tidy.question_of(pred, tidy.NOUL) is not None else "choice")
    spec = (questions or {}).get(question)
    labels = synonyms(labels, synonyms_for(mapping, question))
    if proba_frame is None:
        classes = _predicted_classes(predictions, kind, question_options(spec, kind))
    keep = labels.notna().to_numpy()
    if proba_frame is not None:
        keep = keep & proba_frame.notna().all(axis=1).to_numpy()
    if pred is not None:
        keep = keep & _column(frame, pred, "pred").notna().to_numpy()
    n_missing = int((~keep).sum())
    match = match_labels(question, labels[keep].to_numpy(), kind, classes,
                         question_levels(spec) if kind == "score" else None,
                         open_classes=proba_frame is None and spec is None and kind != "noul",
                         levels_from=levels_from.get(question) if isinstance(levels_from, Mapping) else levels_from,
                         column=str(truth))
    classes = match.classes
    matched = np.flatnonzero(keep)[match.y >= 0]  # rows with a label that matches no class: left out
    keep = np.zeros(len(frame), dtype=bool)
    keep[matched] = True
    y = match.y[match.y >= 0]
    proba = None
    if proba_frame is not None:
        proba = proba_frame[keep].to_numpy(dtype=np.float64)
        proba = np.clip(proba, 0.0, 1.0)
        sums = proba.sum(axis=1, keepdims=True)
        proba = np.divide(proba, sums, out=np.full_like(proba, 1.0 / proba.shape[1]), where=sums > 0)
    if pred is not None:
        pred_index = read_predictions(question, frame[pred][keep].to_numpy(), kind, classes, column=str(pred))
    else:
        assert proba is not None
        pred_index = proba.argmax(axis=1) if len(proba) else np.zeros(0, dtype=np.int64)
    return Target(question, kind, classes, frame.index[keep], np.flatnonzero(keep), y, proba, pred_index,
                  n_missing, columns, match)


def _predicted_classes(predictions: pd.Series, kind: str, options: list[str] | None) -> list[str]:
    """Pred-only classes: the question's options when known, else every value predicted."""
    if kind == "noul":
        return ["false", "true"]
    if options is not None:
        return options
    return sorted({class_name(v, kind) for v in distinct(predictions.dropna().to_numpy())[0]}, key=natural)


def question_options(spec: Any, kind: str) -> list[str] | None:
    """A choice question's option names, or a score's level numbers, from its decide() spec."""
    criteria = spec.get("criteria") if isinstance(spec, Mapping) else None
    if criteria is None:
        return None
    if kind == "score":
        return [str(i) for i in range(len(criteria))]
    return [str(option) for option in criteria]


def question_levels(spec: Any) -> list[str] | None:
    """A score question's level texts, in order, from its decide() spec (`criteria`)."""
    criteria = spec.get("criteria") if isinstance(spec, Mapping) else None
    if not isinstance(criteria, Sequence) or isinstance(criteria, str):
        return None
    return [str(level.get("label", "")) if isinstance(level, Mapping) else str(level) for level in criteria]
