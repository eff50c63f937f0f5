"""`grounding=` of `df.gw.extract`: each extracted value aligned with its row's source text, as tidy columns.

Per field the text quotes (strings, numbers, dates: `gwlab.wire.grounding.kind_of`), two columns beside the
value: `{field}__grounding` (exact, fuzzy, not_found, misplaced; NA where the value is missing) and
`{field}__span` (`(start, end)` into the row's source text, or None; for a misplaced value, where the text
writes it as something else). `__notes` says, per row, which values were ungrounded (not found or
misplaced) and what became of them. "flag" keeps an ungrounded value; "drop" makes it missing (it stays in `__raw`);
"off" aligns nothing and adds no column. The alignment is deterministic, so a run answered from the
checkpoint grounds as the first did; the columns are also kept in the run's record, so `run_answers`
gives them back without the source text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.wire.grounding import EXACT, FUZZY, MISPLACED, NOT_FOUND, UNGROUNDED, Kind, ground, kind_of
from gwlab.wire.schema import Schema

__all__ = ["GROUNDING", "NOTES", "GroundingMode", "GroundingPlan", "restore", "span_column", "status_column"]

GROUNDING = ("flag", "drop", "off")
GroundingMode = Literal["flag", "drop", "off"]
NOTES = "__notes"
_KIND_NAMES = {"identifier": "an identifier", "amount": "an amount", "person_name": "a person's name"}
STATUSES = (EXACT, FUZZY, NOT_FOUND, MISPLACED)  # the categories of `{field}__grounding` (exempt fields have no column)


def status_column(field: str) -> str:
    return f"{field}__grounding"


def span_column(field: str) -> str:
    return f"{field}__span"


@dataclass(frozen=True)
class GroundingPlan:
    """What a run grounds: the mode, the source column, and each grounded field's kind."""

    mode: GroundingMode
    source: str
    kinds: Mapping[str, Kind]

    @classmethod
    def of(cls, mode: GroundingMode | None, source: Any, schema: Schema, read: Sequence[str], columns: Iterable[Any]
           ) -> GroundingPlan | None:
        """Check `grounding=` and `source=`; None when nothing is grounded. The source defaults to the one
        column the prompt reads; a prompt reading several needs `source=` (a span indexes one text), and
        without it the default (`mode` None) grounds nothing while an explicit "flag" or "drop" is refused."""
        if mode is not None and mode not in GROUNDING:
            raise InvalidRequest("grounding", f"one of {', '.join(GROUNDING)}; got {mode!r}")
        if mode == "off" or (mode is None and source is None and len(read) != 1):
            return None  # the default grounds a one-column prompt, or the `source=` named
        mode = mode or "flag"
        names = [str(c) for c in columns]
        if source is None:
            if len(read) != 1:
                raise InvalidRequest("source", f"the prompt reads {len(read)} columns ({', '.join(read)}): name "
                                               "the one whose text the values are grounded in, or grounding='off'")
            source = read[0]
        if not isinstance(source, str) or source not in names:
            raise InvalidRequest("source", f"a column of the frame; got {source!r}")
        kinds = {f: k for f, prop in schema.json["properties"].items() if (k := kind_of(prop, f)) != "exempt"}
        return cls(mode, source, kinds)

    def columns(self) -> list[str]:
        """The columns a grounded run adds, in order."""
        return [c for f in self.kinds for c in (status_column(f), span_column(f))] + [NOTES]

    def apply(self, answers: pd.DataFrame, texts: Sequence[Any]) -> pd.DataFrame:
        """`answers` (one row per source text, in order) with the grounding columns; "drop" blanks the
        ungrounded values (not found or misplaced)."""
        found = {f: [ground(v, _text(t), kind) for v, t in zip(_values(answers[f]), texts, strict=True)]
                 for f, kind in self.kinds.items()}
        notes: list[list[str]] = [[] for _ in range(len(answers))]
        for field, rows in found.items():
            answers[status_column(field)] = pd.Categorical([g.status if g else None for g in rows], STATUSES)
            answers[span_column(field)] = pd.Series([g.span if g else None for g in rows], index=answers.index,
                                                    dtype=object)
            for i, g in enumerate(rows):
                if g is not None and g.status in UNGROUNDED:
                    notes[i].append(self._note(field, _values(answers[field])[i], g.status))
        answers[NOTES] = pd.array(["; ".join(n) if n else None for n in notes], dtype="string")
        return _dropped(answers, self.kinds) if self.mode == "drop" else answers

    def _note(self, field: str, value: Any, status: str) -> str:
        what = "dropped" if self.mode == "drop" else "kept, flagged"
        if status == NOT_FOUND:
            return f"{field}: {value!r} not found in {self.source} ({what})"
        kind = _KIND_NAMES.get(self.kinds[field], self.kinds[field])
        return f"{field}: {value!r} misplaced: {self.source} writes it only as something other than {kind} ({what})"

    def record(self, answers: pd.DataFrame) -> dict[str, Any]:
        """What the run's record keeps to give the columns back (`restore`): JSON-safe."""
        columns = {c: [_json(v) for v in answers[c]] for c in self.columns()}
        return {"mode": self.mode, "source": self.source, "fields": list(self.kinds), "columns": columns}


def restore(frame: pd.DataFrame, kept: Mapping[str, Any]) -> pd.DataFrame:
    """A recorded run's answers (rebuilt from the store) with its grounding columns back, values dropped again."""
    fields = kept["fields"]
    for name, values in kept["columns"].items():
        if name == NOTES:
            frame[name] = pd.array(values, dtype="string")
        elif name.endswith("__span"):
            frame[name] = pd.Series([tuple(v) if v is not None else None for v in values], index=frame.index,
                                    dtype=object)
        else:
            frame[name] = pd.Categorical(values, STATUSES)
    return _dropped(frame, fields) if kept["mode"] == "drop" else frame


def _dropped(answers: pd.DataFrame, fields: Iterable[str]) -> pd.DataFrame:
    """Each value whose grounding is not_found or misplaced made missing (in its column's own dtype)."""
    for field in fields:
        lost = answers[status_column(field)].astype(object).isin(UNGROUNDED).to_numpy()
        if lost.any():
            column = answers[field].copy()
            column[lost] = None
            answers[field] = column
    return answers


def _values(column: pd.Series) -> list[Any]:
    """Plain Python values, None for every kind of missing; timestamps as dates or datetimes."""
    out: list[Any] = []
    for value in column.astype(object):
        if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
            out.append(None)
        elif isinstance(value, pd.Timestamp):
            out.append(value.to_pydatetime())
        else:
            out.append(value.item() if hasattr(value, "item") else value)
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None or pd.isna(value) else str(value)


def _json(value: Any) -> Any:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return list(value) if isinstance(value, tuple) else str(value)
