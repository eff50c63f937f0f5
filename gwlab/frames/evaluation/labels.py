"""Labels matched to a question's classes, so an evaluation compares like with like or says why not.

An analyst's labels are rarely written exactly as the option names: `Price` for the option `price`,
"very negative" for level 0 of a score, 1-5 stars against a 0-4 score. Scoring them as written would
count every such row as wrong and report a silently wrong number. The rules, written once here and
documented in docs/evaluation.md:

- a label written exactly as a class matches it;
- otherwise a label matches the one class equal to it up to case and surrounding spaces, or (score
  questions, when the level texts are known) the one level text equal to it up to case;
- numeric score labels are on the scale the user states (`levels_from=0` or `1`); when not stated,
  labels on a scale one above the levels (some label equals K, none equals 0, every one within 1..K)
  are read as 1-based and shifted down by one, with a warning, and labels that fit both readings (all
  within 1..K-1: a slice of a 1..K set looks 0-based) are read as 0-based with a warning naming both
  readings, so a frame and a slice of it are never read differently without a word;
- an ambiguous case raises `InvalidRequest` naming `truth` (a guess would be a silent wrong number):
  a label equal up to case to two classes, or level text equal to two levels;
- what still matches nothing is left out of the metrics, warned about (labels named, with counts) and
  counted in `n_unmatched`; when nothing at all matches, the evaluation raises.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import EvaluationWarning, InvalidRequest
from gwlab.frames import columns as tidy

__all__ = ["EvaluationWarning", "LabelMatch", "distinct", "match_labels"]

_TRUE = frozenset({"true", "yes", "y", "1", "t"})
_FALSE = frozenset({"false", "no", "n", "0", "f"})
_SHOWN = 8  # unmatched labels named in a message; the rest are counted


@dataclass(frozen=True)
class LabelMatch:
    """How one question's labels were read: what was mapped, shifted, or left unmatched."""

    classes: list[str]
    y: np.ndarray  # class index per label, -1 where unmatched
    mapped: dict[str, str] = field(default_factory=dict)  # label as written -> class (not exact matches)
    shift: int = 0  # added to numeric score labels: -1 reads a 1-based scale as the 0-based levels
    unmatched: dict[str, int] = field(default_factory=dict)  # label -> rows, most frequent first

    @property
    def n_unmatched(self) -> int:
        return sum(self.unmatched.values())


def match_labels(question: str, labels: Sequence[Any], kind: str, classes: list[str],
                 levels: Sequence[str] | None = None, *, open_classes: bool = False,
                 levels_from: int | None = None) -> LabelMatch:
    """Each label's class index under the rules of this module; warns or raises as they say.

    `open_classes`: the classes are only those some answer happened to name (predictions without the
    question's options), so a label outside them is a class never predicted, not an unmatched label.
    `levels_from`: the number a score's numeric labels start at (0 or 1); None reads it from the labels.
    """
    values, codes = distinct(labels)  # each distinct label read once, not once per row
    exact = [class_name(v, kind) for v in values]
    if open_classes:
        folded = _folded(classes, None)
        extra = {name for name in exact if name not in classes and _fold(name) not in folded}
        classes = sorted({*classes, *extra}, key=natural)
    position = {c: i for i, c in enumerate(classes)}
    shift = _scale_shift(question, exact, classes, levels_from) if kind == "score" else 0
    if shift:
        exact = [_shifted(name, shift) for name in exact]
    levels = levels if kind == "score" else None
    folded = _folded(classes, levels)
    counts = np.bincount(codes, minlength=len(values))
    found = np.full(len(values), -1, dtype=np.int64)
    mapped: dict[str, str] = {}
    missing: Counter[str] = Counter()
    for i, (value, name) in enumerate(zip(values, exact, strict=True)):
        if name in position:
            found[i] = position[name]
            continue
        key = _fold(str(value))
        if folded.get(key) == -1:
            raise _ambiguous(question, str(value), key, classes, levels)
        if key in folded:
            found[i] = folded[key]
            mapped[str(value)] = classes[folded[key]]
        else:
            missing[str(value)] += int(counts[i])
    y = found[codes]
    match = LabelMatch(classes, y, mapped, shift, dict(missing.most_common()))
    _report(question, match, len(labels), stated=levels_from is not None)
    return match


def class_name(value: Any, kind: str) -> str:
    """A label as the class name the answer columns use: "true"/"false", "2", "billing"."""
    if kind == "noul":
        if isinstance(value, bool | np.bool_):
            return "true" if value else "false"
        if isinstance(value, int | float | np.number):
            return "true" if tidy.reads_yes(float(value)) else "false"
        text = str(value).strip().lower()
        return "true" if text in _TRUE else "false" if text in _FALSE else text
    if kind == "score":
        number = _number(value)
        if number is not None and float(number).is_integer():
            return str(int(number))
    return str(value)


def distinct(labels: Sequence[Any] | np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The distinct labels in order of first appearance, and each row's position among them.

    Labels equal across types stay apart (True == 1 == 1.0 in Python, but a score reads True as the
    text "True" and 1 as level 1), so an object column is split by type before it is factorized.
    """
    array = labels if isinstance(labels, np.ndarray) else np.array(list(labels), dtype=object)
    if array.dtype != object:
        codes, uniques = pd.factorize(array, use_na_sentinel=False)
        return list(uniques), codes.astype(np.int64)
    kinds, types = pd.factorize(np.fromiter(map(type, array), dtype=object, count=len(array)))
    codes = np.empty(len(array), dtype=np.int64)
    values: list[Any] = []
    for t in range(len(types)):
        rows = np.flatnonzero(kinds == t)
        group, uniques = pd.factorize(array[rows], use_na_sentinel=False)
        codes[rows] = group + len(values)
        values.extend(uniques)
    _, first = np.unique(codes, return_index=True)  # renumber in order of first appearance
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return [values[i] for i in order], rank[codes]


def natural(name: str) -> tuple[int, Any]:
    """Sort key: numeric class names by value ("2" before "10"), then the others by text."""
    return (0, int(name)) if name.lstrip("-").isdigit() else (1, name)


def _number(value: Any) -> float | None:
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.number):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _shifted(name: str, shift: int) -> str:
    return str(int(name) + shift) if name.lstrip("-").isdigit() else name


def _scale_shift(question: str, names: Sequence[str], classes: list[str], levels_from: int | None) -> int:
    """-1 to read numeric labels (`names`: the labels' class names) as 1..K against levels 0..K-1: as
    stated, else when provable."""
    if levels_from is not None:
        if levels_from not in (0, 1) or isinstance(levels_from, bool):
            raise InvalidRequest("levels_from", f"question {question!r}: 0 (labels 0..K-1) or 1 (labels 1..K); "
                                                f"got {levels_from!r}")
        return -levels_from
    numbers = set(names)
    levels = [int(c) for c in classes if c.lstrip("-").isdigit()]
    values = [int(n) for n in numbers if n.lstrip("-").isdigit()]
    if not values or len(levels) != len(classes):
        return 0
    k = len(levels)
    if max(values) == k and min(values) >= 1 and 0 not in values:
        return -1
    if min(values) >= 1 and max(values) <= k - 1:
        warnings.warn(f"question {question!r}: the labels ({min(values)}..{max(values)}) fit both levels "
                      f"0..{k - 1} and a 1-based scale 1..{k}; read as 0-based (label 1 = level 1). If the "
                      f"labels run 1..{k}, pass levels_from=1 (label 1 = level 0); levels_from=0 says they "
                      "are 0-based and silences this", EvaluationWarning, stacklevel=6)
    return 0


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _folded(classes: list[str], levels: Sequence[str] | None) -> dict[str, int]:
    """Case-folded class names (and level texts) -> class index; -1 for a fold shared by two classes."""
    names: dict[str, set[int]] = {}
    for i, name in enumerate(classes):
        names.setdefault(_fold(name), set()).add(i)
    for i, text in enumerate(levels or ()):
        if i < len(classes):
            names.setdefault(_fold(str(text)), set()).add(i)
    return {key: next(iter(hits)) if len(hits) == 1 else -1 for key, hits in names.items()}


def _ambiguous(question: str, label: str, key: str, classes: list[str],
               levels: Sequence[str] | None) -> InvalidRequest:
    hits = [c for i, c in enumerate(classes)
            if _fold(c) == key or (levels is not None and i < len(levels) and _fold(str(levels[i])) == key)]
    return InvalidRequest("truth", f"label {label!r} of question {question!r} matches "
                                   f"{' and '.join(map(repr, hits))} up to case: ambiguous; map the label "
                                   "column to the exact option names first")


def _report(question: str, match: LabelMatch, n: int, stated: bool = False) -> None:
    """Warn about a shifted scale the user did not state and unmatched labels; raise when nothing matched."""
    if match.shift and not stated:
        warnings.warn(f"question {question!r}: the labels run 1..{len(match.classes)} against levels "
                      f"0..{len(match.classes) - 1}; read as a 1-based scale and shifted down by one "
                      "(see the evaluation's `label_shift`)", EvaluationWarning, stacklevel=4)
    if not match.unmatched:
        return
    shown = ", ".join(f"{label!r} ({count})" for label, count in list(match.unmatched.items())[:_SHOWN])
    more = f" and {len(match.unmatched) - _SHOWN} more" if len(match.unmatched) > _SHOWN else ""
    options = ", ".join(map(repr, match.classes))
    if match.n_unmatched == n:
        raise InvalidRequest("truth", f"no label of question {question!r} matches its options ({options}): "
                                      f"{shown}{more}; nothing left to evaluate")
    warnings.warn(f"question {question!r}: {match.n_unmatched} of {n} labels match none of its options "
                  f"({options}) and are left out (`n_unmatched`): {shown}{more}", EvaluationWarning,
                  stacklevel=4)
