"""Per-row texts from a frame: `"{ticket}"` templates, bare column names, or columns packed as JSON.

A field is the whole text between braces, so column names with spaces work (`"{first name}"`);
`"{price:.2f}"` applies a format spec when `price` is a column; `{{` and `}}` are literal braces.
A missing value in a referenced column makes that row an error row: sending the text "nan" to a model
would be a made-up answer, not a failed one.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest

__all__ = ["Rendered", "Template", "json_value"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One value per row (None where the row failed) and the reason per failed row."""

    values: list[Any]
    errors: dict[int, str]  # row position -> message


def _unknown(field: str, name: str, columns: Sequence[Any]) -> InvalidRequest:
    shown = ", ".join(repr(str(c)) for c in list(columns)[:20])
    more = ", …" if len(columns) > 20 else ""
    return InvalidRequest(field, f"unknown column {name!r}; the frame has {shown}{more}")


@dataclass(frozen=True, slots=True)
class Template:
    """How a row becomes one request field: a text template, or a JSON object of columns."""

    field: str  # the request field it fills, for messages: "state", "prompt", "system"
    format: str | None  # positional format string ("{0} and {1:.2f}") for text; None for JSON
    columns: tuple[str, ...]  # the frame columns read, in the order `format` uses them
    keys: tuple[str, ...] = ()  # JSON object keys (one per column) when format is None
    literal: bool = False  # a constant text (only where allowed, e.g. system=)

    @classmethod
    def parse(cls, spec: str | Sequence[str] | Mapping[str, str], columns: Sequence[Any], *,
              field: str, literal_ok: bool = False) -> Template:
        """Check `spec` against the frame's columns; an unknown column raises InvalidRequest naming it."""
        names = [str(c) for c in columns]
        known = set(names)
        if isinstance(spec, Mapping) or (not isinstance(spec, str) and isinstance(spec, Sequence)):
            pairs = list(spec.items()) if isinstance(spec, Mapping) else [(str(c), c) for c in spec]
            if not pairs:
                raise InvalidRequest(field, "needs at least one column")
            for _, column in pairs:
                if str(column) not in known:
                    raise _unknown(field, str(column), names)
            return cls(field, None, tuple(str(c) for _, c in pairs), tuple(str(k) for k, _ in pairs))
        if not isinstance(spec, str):
            raise InvalidRequest(field, f"must be a template string, a column name, or a list/dict of "
                                        f"columns; got {type(spec).__name__}")
        if "{" not in spec and "}" not in spec:
            if spec in known:
                return cls(field, "{0}", (spec,))
            if literal_ok:
                return cls(field, spec, (), literal=True)
            raise InvalidRequest(field, f"{spec[:40]!r} is neither a column nor a template with {{column}} "
                                        f"fields; the frame has {', '.join(map(repr, names[:20]))}")
        fmt, used = _compile(spec, known, field, names)
        return cls(field, fmt, tuple(used), literal=not used)

    def render(self, frame: pd.DataFrame) -> Rendered:
        """The value for every row of `frame`, in row order."""
        n = len(frame)
        if self.literal:
            return Rendered([self.format] * n, {})
        data = [_python_values(frame, c) for c in self.columns]
        errors: dict[int, str] = {}
        if self.format is None:  # a JSON object per row; a missing value is JSON null, not an error
            keys = self.keys
            values: list[Any] = [dict(zip(keys, row, strict=True)) for row in zip(*data, strict=True)]
            return Rendered(values, errors)
        fmt = self.format
        values = []
        single = len(data) == 1 and fmt == "{0}"
        for position, row in enumerate(zip(*data, strict=True)):
            missing = [c for c, v in zip(self.columns, row, strict=True) if v is None]
            if missing:
                errors[position] = f"{self.field}: no value in column {missing[0]!r} in this row"
                values.append(None)
                continue
            text = row[0] if single and isinstance(row[0], str) else fmt.format(*row)
            if not text.strip():
                errors[position] = f"{self.field}: empty in this row"
                values.append(None)
                continue
            values.append(text)
        return Rendered(values, errors)


def _compile(spec: str, known: set[str], field: str, names: list[str]) -> tuple[str, list[str]]:
    """The template as a positional format string, and the columns it reads."""
    out: list[str] = []
    used: list[str] = []
    i, n = 0, len(spec)
    while i < n:
        ch = spec[i]
        if ch == "{" and spec.startswith("{{", i):
            out.append("{{")
            i += 2
        elif ch == "}" and spec.startswith("}}", i):
            out.append("}}")
            i += 2
        elif ch == "}":
            raise InvalidRequest(field, f"a single '}}' at position {i}; write '}}}}' for a literal brace")
        elif ch == "{":
            end = spec.find("}", i + 1)
            if end < 0:
                raise InvalidRequest(field, f"a '{{' at position {i} is never closed; write '{{{{' for a "
                                            "literal brace")
            name, spec_part = spec[i + 1:end], ""
            if name not in known and ":" in name and name.split(":", 1)[0] in known:
                name, spec_part = name.split(":", 1)
                spec_part = ":" + spec_part
            if name not in known:
                raise _unknown(field, name, names)
            out.append(f"{{{len(used)}{spec_part}}}")
            used.append(name)
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), used


def _python_values(frame: pd.DataFrame, column: str) -> list[Any]:
    """The column as plain Python values (JSON-ready), missing values as None."""
    series = frame[column] if column in frame.columns else frame[_by_text(frame, column)]
    if isinstance(series, pd.DataFrame):
        raise InvalidRequest(column, "this column name is used more than once in the frame")
    return [json_value(v) for v in series.tolist()]


def _by_text(frame: pd.DataFrame, column: str) -> Any:
    return next(c for c in frame.columns if str(c) == column)


def json_value(value: Any) -> Any:
    """A cell as a JSON-safe Python value: numpy scalars unwrapped, times as ISO text, NA as None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, np.generic):
        return json_value(value.item())
    if isinstance(value, pd.Timestamp | dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [json_value(v) for v in value]
    return str(value)
