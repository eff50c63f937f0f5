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
- yes/no values meet whatever they are written as: a bool, the numbers 0 and 1, and the texts
  "yes"/"no", "true"/"false", "y"/"n", "t"/"f" in any case are one reading (`boolean`); a noul
  question's labels and any question whose classes are such a pair (predictions True/False, options
  "yes"/"no") are matched by it. A noul label that is a number other than 0 or 1 (a 1/2 coding, a code 2
  for "unsure") cannot be read unambiguously and is refused naming the column and the values;
- `labels=` (synonyms: {label as written: what it means}, None for "no label") is applied first, by
  the same reading (a bool key is never a number key; text keys match up to case and spaces);
- an ambiguous case raises `InvalidRequest` naming `truth` (a guess would be a silent wrong number):
  a label equal up to case to two classes, or level text equal to two levels;
- predictions are read by the same rules (`read_predictions`): one matching no class is counted wrong
  and warned about, the column and the values named;
- what still matches nothing is left out of the metrics, warned about (labels named, with counts) and
  counted in `n_unmatched`; when nothing at all matches, the evaluation raises.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import EvaluationWarning, InvalidRequest
from gwlab.frames import columns as tidy

__all__ = ["EvaluationWarning", "LabelMatch", "boolean", "distinct", "match_labels", "read_predictions", "synonyms"]

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


def match_labels(question: str, labels: Sequence[Any] | np.ndarray, kind: str, classes: list[str],
                 levels: Sequence[str] | None = None, *, open_classes: bool = False,
                 levels_from: int | None = None, column: str | None = None) -> LabelMatch:
    """Each label's class index under the rules of this module; warns or raises as they say.

    `open_classes`: the classes are only those some answer happened to name (predictions without the
    question's options), so a label outside them is a class never predicted, not an unmatched label.
    `levels_from`: the number a score's numeric labels start at (0 or 1); None reads it from the labels.
    `column`: the label column's name, for the messages.
    """
    values, codes = distinct(labels)  # each distinct label read once, not once per row
    if kind == "noul":
        _refuse_codes(question, column, values, codes)
    exact = [class_name(v, kind) for v in values]
    if open_classes:
        classes = _opened(question, column, classes, kind, values, exact, codes)
    shift = _scale_shift(question, exact, classes, levels_from) if kind == "score" else 0
    if shift:
        exact = [_shifted(name, shift) for name in exact]
    reader = _Reader(classes, levels if kind == "score" else None, kind)
    counts = np.bincount(codes, minlength=len(values))
    found = np.full(len(values), -1, dtype=np.int64)
    mapped: dict[str, str] = {}
    missing: Counter[str] = Counter()
    for i, (value, name) in enumerate(zip(values, exact, strict=True)):
        hit = reader.find(name, value)
        if hit == -1:
            raise _ambiguous(question, str(value), _fold(str(value)), classes, reader.levels)
        if hit is None:
            missing[str(value)] += int(counts[i])
            continue
        found[i] = hit
        if name != classes[hit]:
            mapped[str(value)] = classes[hit]
    y = found[codes]
    match = LabelMatch(classes, y, mapped, shift, dict(missing.most_common()))
    _report(question, match, len(labels), stated=levels_from is not None, column=column)
    return match


def as_answers(question: str, labels: pd.Series, kind: str, classes: list[str],
               levels: Sequence[str] | None = None, *, field: str = "oracle") -> np.ndarray:
    """Labels in a model's answer terms (True/False, the option, the level number; None where missing),
    read by `match_labels`' rules; a label they cannot read is refused naming `field` and the values
    (labels answering for a model are delivered, so nothing may be left out or guessed)."""
    out = np.full(len(labels), None, dtype=object)
    keep = labels.notna().to_numpy()
    if not keep.any():
        return out
    column = str(labels.name) if labels.name is not None else None
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", EvaluationWarning)
            match = match_labels(question, labels[keep].to_numpy(), kind, classes, levels, column=column)
    except InvalidRequest as error:
        raise InvalidRequest(field, str(error).removeprefix(f"{error.field}: ")) from None
    if match.unmatched:
        shown = ", ".join(f"{label!r} ({count})" for label, count in list(match.unmatched.items())[:_SHOWN])
        raise InvalidRequest(field, f"question {question!r}{_in(column)}: labels matching none of its classes "
                                    f"({', '.join(map(repr, match.classes))}): {shown}; map them with labels= "
                                    "or fix them before the cascade runs")
    for w in said:
        warnings.warn(str(w.message), w.category, stacklevel=3)
    names = np.array(match.classes, dtype=object)[match.y]
    out[keep] = [_answer(name, kind) for name in names]
    return out


def _answer(name: str, kind: str) -> Any:
    return name == "true" if kind == "noul" else int(name) if kind == "score" else name


def _opened(question: str, column: str | None, classes: list[str], kind: str, values: list[Any],
            exact: list[str], codes: np.ndarray) -> list[str]:
    """Classes known only from the predictions, with the labels' own classes added. Predictions that are
    yes/no (True/False, 0/1, "yes"/"no") make a yes/no question: its labels are read as a noul's, a 1/2
    coding refused, and only the yes or no never predicted is added."""
    reader = _Reader(classes, None, kind)
    pair = reader.pair
    if pair is not None and (len(pair) == 2 or _number(classes[0]) is None):
        _refuse_codes(question, column, values, codes)
        other = next((name for name, v in zip(exact, values, strict=True) if boolean(v) not in (None, *pair)), None)
        return sorted({*classes, *([other] if other is not None else [])}, key=natural)
    extra = {name for name, v in zip(exact, values, strict=True) if reader.find(name, v) is None}
    return sorted({*classes, *extra}, key=natural)


def read_predictions(question: str, predictions: Sequence[Any] | np.ndarray, kind: str, classes: list[str],
                     column: str | None = None) -> np.ndarray:
    """Each prediction's class index by the labels' rules (-1: none, counted wrong and warned of)."""
    values, codes = distinct(predictions)
    reader = _Reader(classes, None, kind)
    found = np.full(len(values), -1, dtype=np.int64)
    counts = np.bincount(codes, minlength=len(values))
    missing: Counter[str] = Counter()
    for i, value in enumerate(values):
        hit = reader.find(class_name(value, kind), value)
        if hit is None or hit == -1:
            missing[str(value)] += int(counts[i])
        else:
            found[i] = hit
    if missing:
        shown = ", ".join(f"{label!r} ({count})" for label, count in missing.most_common(_SHOWN))
        warnings.warn(f"question {question!r}{_in(column)}: {sum(missing.values())} of {len(codes)} predictions "
                      f"match none of its classes ({', '.join(map(repr, classes))}) and are counted wrong: "
                      f"{shown}", EvaluationWarning, stacklevel=4)
    per_row: np.ndarray = found[codes]
    return per_row


def boolean(value: Any) -> bool | None:
    """The yes/no a value reads as unambiguously: a bool, 0 or 1, or yes/no/true/false/y/n/t/f in any
    case and spacing; None for anything else (2, 0.7, "unsure", a missing value)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.number):
        return {0.0: False, 1.0: True}.get(float(value))
    if isinstance(value, str):
        text = _fold(value)
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        number = _number(text)
        return {0.0: False, 1.0: True}.get(number) if number is not None else None
    return None


def synonyms_for(labels: Mapping[Any, Any] | None, question: str) -> Mapping[Any, Any] | None:
    """The `labels=` synonyms of one question: `{question id: {label: meaning}}` or one mapping for all."""
    if not labels:
        return None
    if not isinstance(labels, Mapping):
        raise InvalidRequest("labels", f"a dict {{label as written: what it means}}; got {type(labels).__name__}")
    if all(isinstance(v, Mapping) for v in labels.values()):
        return labels.get(question)
    return labels


def synonyms(values: pd.Series, mapping: Mapping[Any, Any] | None) -> pd.Series:
    """Labels with `labels=` applied: a value written as a key reads as its value (None: no label).

    Keys are read by type, so {1: False, 2: True} never maps the bool True; text up to case and spaces."""
    if not mapping:
        return values
    table = {_key(k): v for k, v in mapping.items()}
    out = [v if _absent(v) else table.get(_key(v), v) for v in values.tolist()]
    return pd.Series(out, index=values.index, dtype=object, name=values.name)


def _key(value: Any) -> tuple[str, Any]:
    if isinstance(value, bool | np.bool_):
        return ("bool", bool(value))
    if isinstance(value, int | float | np.number):
        return ("number", float(value))
    if isinstance(value, str):
        return ("text", _fold(value))
    return ("other", repr(value))


def _absent(value: Any) -> bool:
    return value is None or (not isinstance(value, list | dict | tuple) and bool(pd.isna(value)))


class _Reader:
    """Finds a value's class: exact name, then up to case and spaces (and level text), then as yes/no
    when the classes are a yes/no pair; None when nothing matches, -1 when two classes do."""

    def __init__(self, classes: list[str], levels: Sequence[str] | None, kind: str) -> None:
        self.classes, self.levels = classes, levels
        self.position = {c: i for i, c in enumerate(classes)}
        self.folded = _folded(classes, levels)
        self.pair = None if kind == "score" else _yes_no(classes)

    def find(self, name: str, value: Any) -> int | None:
        if name in self.position:
            return self.position[name]
        key = _fold(str(value))
        if key in self.folded:
            return self.folded[key]
        said = boolean(value) if self.pair is not None else None
        return self.pair.get(said) if self.pair is not None and said is not None else None


def _yes_no(classes: list[str]) -> dict[bool, int] | None:
    """class index by yes/no when every class reads as a different one of yes and no, else None."""
    read = [boolean(c) for c in classes]
    if not read or None in read or len(set(read)) != len(read):
        return None
    return {b: i for i, b in enumerate(read) if b is not None}


def _refuse_codes(question: str, column: str | None, values: list[Any], codes: np.ndarray) -> None:
    """A noul label written as a number other than 0/1 (a 1/2 coding, a code for "unsure") is refused."""
    odd = [v for v in values if not isinstance(v, bool | np.bool_) and _number(v) is not None
           and boolean(v) is None and not _absent(v)]
    if not odd:
        return
    def listed(found: list[Any]) -> str:
        items = [v.item() if isinstance(v, np.generic) else v for v in found]
        unique = {(type(v).__name__, repr(v)): v for v in items}.values()
        plain = sorted(unique, key=lambda v: (type(v).__name__, str(v)))
        return ", ".join(map(repr, plain[:_SHOWN])) + (" ..." if len(plain) > _SHOWN else "")

    seen = listed([v for v in values if not _absent(v)])
    raise InvalidRequest("truth", f"question {question!r}{_in(column)}: labels {seen}; {listed(odd)} not yes/no: a "
                                  "noul label is True/False, 1/0, 'yes'/'no' or 'true'/'false'. A 1/2 coding or "
                                  "a code for 'unsure' cannot be read unambiguously: map them with labels= "
                                  "(e.g. labels={1: False, 2: True, 3: None})")


def _in(column: str | None) -> str:
    return f" (column {column!r})" if column is not None else ""


def class_name(value: Any, kind: str) -> str:
    """A label as the class name the answer columns use: "true"/"false", "2", "billing".

    A noul number in [0, 1] is a probability (P(true) >= 0.5 reads true); labels are held to 0/1 first."""
    if kind == "noul":
        if isinstance(value, bool | np.bool_):
            return "true" if value else "false"
        if isinstance(value, int | float | np.number) and 0 <= float(value) <= 1:
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


def _report(question: str, match: LabelMatch, n: int, stated: bool = False, column: str | None = None) -> None:
    """Warn about a shifted scale the user did not state and unmatched labels; raise when nothing matched."""
    if match.shift and not stated:
        warnings.warn(f"question {question!r}{_in(column)}: the labels run 1..{len(match.classes)} against levels "
                      f"0..{len(match.classes) - 1}; read as a 1-based scale and shifted down by one "
                      "(see the evaluation's `label_shift`)", EvaluationWarning, stacklevel=4)
    if not match.unmatched:
        return
    shown = ", ".join(f"{label!r} ({count})" for label, count in list(match.unmatched.items())[:_SHOWN])
    more = f" and {len(match.unmatched) - _SHOWN} more" if len(match.unmatched) > _SHOWN else ""
    options = ", ".join(map(repr, match.classes))
    if match.n_unmatched == n:
        raise InvalidRequest("truth", f"no label of question {question!r}{_in(column)} matches its options "
                                      f"({options}): "
                                      f"{shown}{more}; nothing left to evaluate")
    warnings.warn(f"question {question!r}{_in(column)}: {match.n_unmatched} of {n} labels match none of its options "
                  f"({options}) and are left out (`n_unmatched`): {shown}{more}", EvaluationWarning,
                  stacklevel=4)
