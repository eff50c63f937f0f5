"""`gwlab.evaluate(..., kind="fields")`: extracted columns (`df.gw.extract`) scored against label columns.

A null is an answer here ("not in the text"), so a null label is a label, not a missing one: per field,
`right` counts the rows whose value equals the label, nulls included; `invented` a value where the
label is null; `missed` a null where the label has a value; `wrong` two different values. Accuracy is
right / n with its Wilson interval (stats/intervals.py); `mae` is the mean absolute error over the
rows where both are numbers (numeric fields only). Rows whose extraction failed (`__status` error or
not run) have no answer: they are left out and counted in `n_missing`. The status column is found
under any `prefix=` the extract was given (`{prefix}__status`, the one sharing the field column's
prefix); a frame with no status column is scored only when no row lacks every scored value, since a
failed extraction (all values null) cannot otherwise be told from a right "absent", and is refused
naming `pred` when one does.

Values are read by the labels' reader (frames/labels.py): a yes/no field meets True/False, 0/1,
"yes"/"no" and "true"/"false" labels; text is compared up to case and surrounding/inner spaces; numbers
by value (1 equals 1.0, "42" equals 42); dates by calendar day (a naive date label meets a UTC
midnight). A label a yes/no field cannot read ("unsure", 2) is counted
wrong and warned of, naming the column and the values. `labels=` synonyms apply to the label columns.

When the extracted column has its grounding beside it (`{pred}__grounding`, frames/grounding.py), four
more counts: `grounded` and `ungrounded` values (exact or fuzzy; not_found or misplaced), `invented_ungrounded` (the
invented values grounding caught) and `right_ungrounded` (right values it flagged; with "drop", a right
value dropped counts as missed instead): NA for a field without grounding, left out when no field has it.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation import evidence
from gwlab.frames.evaluation.labels import EvaluationWarning, boolean, synonyms
from gwlab.stats import intervals
from gwlab.wire.grounding import UNGROUNDED

__all__ = ["FieldEvaluation", "evaluate_fields"]

ANSWERED = ("sent", "cached", "duplicate")  # the `__status` labels of a row that has an answer
_COLUMNS = ["n", "n_missing", "truth_null", "right", "accuracy", "accuracy_low", "accuracy_high",
            "invented", "missed", "wrong", "mae", "small"]
_GROUNDING = ["grounded", "ungrounded", "invented_ungrounded", "right_ungrounded"]


@dataclass(frozen=True)
class FieldEvaluation:
    """Per extracted field (one row of `metrics` each): counts, accuracy with its interval, MAE."""

    metrics: pd.DataFrame
    level: float = 0.95

    def __getitem__(self, field: str) -> pd.Series:
        row = self.metrics.loc[field]
        assert isinstance(row, pd.Series), "one metrics row per field: a schema's fields are unique"
        return row

    def __repr__(self) -> str:
        table = self.metrics.to_string(float_format="{:.3f}".format, na_rep="-")
        return f"Evaluation of {len(self.metrics)} field(s), {self.level:.0%} Wilson intervals on accuracy\n{table}"

    def _repr_html_(self) -> str:
        head = f"<b>Evaluation</b> of {len(self.metrics)} field(s), {self.level:.0%} Wilson intervals on accuracy"
        return head + self.metrics.to_html(float_format="{:.3f}".format, na_rep="–")


def evaluate_fields(frame: pd.DataFrame, truth: Mapping[str, str], pred: Mapping[str, str] | None = None, *,
                    level: float = 0.95, labels: Mapping[Any, Any] | None = None) -> FieldEvaluation:
    """Score extracted fields (`df.gw.extract`) against label columns: per field, exact-match accuracy with
    its Wilson interval, values invented and missed, MAE for numbers.

    Parameters
    ----------
    frame : DataFrame
        Labels and extracted columns side by side.
    truth : dict
        ``{field: label column}``; a null label means "not in the text" and is scored like a value.
    pred : dict, optional
        ``{field: extracted column}`` (default: the field's own name).
    level : float, default 0.95
        Confidence level of the accuracy's Wilson interval.
    labels : dict, optional
        Synonyms, as for ``evaluate`` (``{label as written: what it means}``, or ``{field: {...}}``).

    Returns
    -------
    FieldEvaluation
        ``metrics``: per field ``n``, ``n_missing`` (rows whose extraction failed, left out),
        ``truth_null``, ``right``, ``accuracy`` (``_low``/``_high``), ``invented`` (a value where the
        label is null), ``missed`` (null where it has one), ``wrong``, ``mae`` and ``small``; with
        grounding, its counts. ``gwlab.evaluate(..., kind="fields")`` is the same call.

    Examples
    --------
    >>> gwlab.evaluate_fields(out, truth={"order": "true_order"})  # doctest: +SKIP
    """
    if not isinstance(truth, Mapping) or not truth:
        raise InvalidRequest("truth", "with kind='fields', a dict {field: label column}")
    pred = {field: field for field in truth} if pred is None else pred
    if not isinstance(pred, Mapping) or set(pred) != set(truth):
        raise InvalidRequest("pred", f"a dict {{field: extracted column}} with the fields of truth: {sorted(truth)}")
    for name, columns in (("truth", truth), ("pred", pred)):
        unknown = [c for c in columns.values() if c not in frame.columns]
        if unknown:
            raise InvalidRequest(name, f"column(s) not in the frame: {unknown}")
    level = intervals.check_level(level)
    rows = {}
    for field in truth:
        answered = _answered(frame, pred[field], list(pred.values()))
        label = synonyms(frame.loc[answered, truth[field]], _for(labels, field))
        rows[field] = (_field_row(label, frame.loc[answered, pred[field]], int((~answered).sum()), level)
                       | _grounding_counts(frame.loc[answered], truth[field], pred[field]))
    table = pd.DataFrame.from_dict(rows, orient="index")[_COLUMNS + _GROUNDING].rename_axis("field")
    if table[_GROUNDING].isna().all().all():
        table = table[_COLUMNS]  # no field was grounded: no grounding counts
    evidence.warn_small(table)
    return FieldEvaluation(table, level)


def _for(labels: Mapping[Any, Any] | None, field: str) -> Mapping[Any, Any] | None:
    if labels and all(isinstance(v, Mapping) for v in labels.values()):
        return labels.get(field)
    return labels


def _answered(frame: pd.DataFrame, column: str, scored: list[str]) -> np.ndarray:
    """Rows with an answer, by the status column of the extract that wrote `column` (any prefix)."""
    status = _status_column(frame, column)
    if status is not None:
        return frame[status].astype(object).isin(ANSWERED).to_numpy()
    empty = frame[scored].isna().all(axis=1)
    if empty.any():
        raise InvalidRequest("pred", f"no __status column beside {column!r}, and {int(empty.sum())} of {len(frame)} "
                                     "rows have no value in any scored field: a failed extraction cannot be told "
                                     "from a right 'absent'. Keep the extract's `__status` column (df.join(out) "
                                     "keeps it) or leave those rows out")
    return np.ones(len(frame), dtype=bool)


def _status_column(frame: pd.DataFrame, column: str) -> str | None:
    """`{prefix}__status` for the longest prefix `column` starts with; the only status column else."""
    found = [str(c) for c in frame.columns if str(c).endswith("__status")]
    mine = [c for c in found if column.startswith(c.removesuffix("__status"))]
    if mine:
        return max(mine, key=len)
    return found[0] if len(found) == 1 else None


def _field_row(truth: pd.Series, pred: pd.Series, n_missing: int, level: float) -> dict[str, Any]:
    if not len(truth):
        raise InvalidRequest("truth", f"no row to evaluate: all {n_missing} rows lack an answer (__status)")
    labels, values = [_plain(v) for v in truth], [_plain(v) for v in pred]
    t_null = np.array([v is None for v in labels])
    p_null = np.array([v is None for v in values])
    same = np.array([_same(a, b) for a, b in zip(labels, values, strict=True)], dtype=bool)
    _warn_unreadable(str(truth.name), labels, values)
    right = int(same.sum())
    low, high = intervals.wilson(right, len(labels), level)
    return {"n": len(labels), "n_missing": n_missing, "truth_null": int(t_null.sum()), "right": right,
            "accuracy": right / len(labels), "accuracy_low": float(low), "accuracy_high": float(high),
            "invented": int((t_null & ~p_null).sum()), "missed": int((~t_null & p_null).sum()),
            "wrong": int((~t_null & ~p_null & ~same).sum()), "mae": _mae(labels, values, pred.dtype),
            "small": len(labels) < intervals.MIN_ROWS}


def _grounding_counts(frame: pd.DataFrame, truth: str, pred: str) -> dict[str, Any]:
    """Grounded and ungrounded values, and how the ungrounded split into invented and right ones."""
    status = frame.get(f"{pred}__grounding")
    if status is None:
        return dict.fromkeys(_GROUNDING, pd.NA)
    found = status.astype(object).isin(("exact", "fuzzy")).to_numpy()
    lost = status.astype(object).isin(UNGROUNDED).to_numpy()
    labels = [_plain(v) for v in frame[truth]]
    values = [_plain(v) for v in frame[pred]]
    t_null = np.array([v is None for v in labels])
    right = np.array([a is not None and _same(a, b) for a, b in zip(labels, values, strict=True)])
    return {"grounded": int(found.sum()), "ungrounded": int(lost.sum()),
            "invented_ungrounded": int((lost & t_null).sum()), "right_ungrounded": int((lost & right).sum())}


def _mae(labels: list[Any], values: list[Any], dtype: Any) -> float:
    """Mean absolute error over the rows where both are numbers; NaN for a field that is not numeric."""
    if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
        return float("nan")
    pairs = [(a, b) for a, b in zip(labels, values, strict=True) if _number(a) and _number(b)]
    return float(np.mean([abs(float(a) - float(b)) for a, b in pairs])) if pairs else float("nan")


def _plain(value: Any) -> Any:
    """A Python value, None for every kind of missing (None, NaN, pd.NA, NaT)."""
    if value is None or (not isinstance(value, list | dict) and pd.isna(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(label: Any, value: Any) -> bool:
    """Equal by the labels' reader: nulls equal nulls; yes/no in any writing; numbers by value; text up
    to case and spaces; anything else exactly."""
    if label is None or value is None:
        return label is None and value is None
    if isinstance(value, bool) or isinstance(label, bool):
        said, meant = boolean(value), boolean(label)
        return said is not None and said == meant
    a, b = _numeric(label), _numeric(value)
    if a is not None and b is not None:
        return a == b
    days = _day(label), _day(value)
    if None not in days:
        return days[0] == days[1]
    if isinstance(label, str) and isinstance(value, str):
        return _fold(label) == _fold(value)
    return type(label) is type(value) and label == value


def _numeric(value: Any) -> float | None:
    if _number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _warn_unreadable(column: str, labels: list[Any], values: list[Any]) -> None:
    """A yes/no field's label that reads as neither (2, "unsure") is counted wrong: say so, naming them."""
    if not any(isinstance(v, bool) for v in values):
        return
    odd = sorted({repr(a) for a in labels if a is not None and boolean(a) is None})
    if odd:
        warnings.warn(f"label column {column!r}: {', '.join(odd[:8])} cannot be read as yes/no and count as wrong; "
                      "map them with labels=", EvaluationWarning, stacklevel=5)


def _day(value: Any) -> dt.date | None:
    """The calendar day of a date (a `datetime.date`, or a timestamp at midnight, naive or UTC, as a
    `datetime.date` field's column holds it); None for anything else, a time of day included, which
    is compared exactly."""
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if isinstance(value, dt.datetime):
        utc = value.tzinfo is None or value.utcoffset() == dt.timedelta(0)
        return value.date() if utc and value.time() == dt.time(0) else None
    return value if isinstance(value, dt.date) else None
