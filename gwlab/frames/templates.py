"""Per-row texts from a frame: `"{ticket}"` templates, bare column names, or columns packed as JSON.

A field is the whole text between braces, so column names with spaces work (`"{first name}"`);
`"{price:.2f}"` applies a format spec when `price` is a column; `{{` and `}}` are literal braces.
A missing value in a referenced column makes that row an error row: sending the text "nan" to a model
would be a made-up answer, not a failed one.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest

__all__ = ["Rendered", "Rows", "Template", "json_value"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One value per row (None where the row failed) and the reason per failed row."""

    values: list[Any]
    errors: dict[int, str]  # row position -> message


def _has(columns: Sequence[Any]) -> str:
    """"the frame has 'a', 'b'" for an error message; a frame without columns says so, not nothing."""
    if not len(columns):
        return "the frame has no columns"
    shown = ", ".join(repr(str(c)) for c in list(columns)[:20])
    return f"the frame has {shown}" + (", …" if len(columns) > 20 else "")


def _unknown(field: str, name: str, columns: Sequence[Any]) -> InvalidRequest:
    return InvalidRequest(field, f"unknown column {name!r}; {_has(columns)}")


@dataclass(frozen=True, slots=True)
class Template:
    """How a row becomes one request field: a text template, or a JSON object of columns."""

    field: str  # the request field it fills, for messages: "state", "prompt", "system"
    format: str | None  # positional format string ("{0} and {1:.2f}") for text; None for JSON
    columns: tuple[str, ...]  # the frame columns read, in the order `format` uses them
    keys: tuple[str, ...] = ()  # JSON object keys (one per column) when format is None
    literal: bool = False  # a constant text (only where allowed, e.g. system=)
    specs: tuple[str, ...] = ()  # per column read: its format spec (":.2f") or ""
    source: str = ""  # the template as written, for error messages

    @classmethod
    def parse(cls, spec: str | Sequence[str] | Mapping[str, str], columns: Iterable[Any], *,
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
                                        f"fields; {_has(names)}")
        fmt, used, specs = _compile(spec, known, field, names)
        return cls(field, fmt, tuple(used), literal=not used, specs=tuple(specs), source=spec)

    def rows(self, frame: pd.DataFrame, *, blank: str = "fail") -> Rows:
        """The distinct values of `frame`'s rows, rendered only when asked for (see `Rows`).

        `blank="fail"` fails a row whose text template reads an empty or whitespace-only value, as a
        missing one does: "Summarise: {email}" with no email got a summary invented for nothing.
        `blank="send"` sends it, unless the whole text is blank."""
        if blank not in ("fail", "send"):
            raise InvalidRequest("blank", f"must be 'fail' or 'send'; got {blank!r}")
        n = len(frame)
        if self.literal:
            text = self.format
            return Rows(np.zeros(n, dtype=np.intp), np.zeros(min(n, 1), dtype=np.intp), lambda j: text, {})
        columns = [_column(frame, c) for c in self.columns]
        errors: dict[int, str] = {}
        failed = np.zeros(n, dtype=bool)
        if self.format is not None:  # text: a missing value fails the row; JSON sends it as null
            for name, series in zip(self.columns, columns, strict=True):
                missing = series.isna().to_numpy() & ~failed
                errors.update((int(i), f"{self.field}: no value in column {name!r} in this row")
                              for i in np.flatnonzero(missing))
                failed |= missing
            if self.format == "{0}" or blank == "fail":  # a bare column's blank is a blank text: never sent
                hint = "" if self.format == "{0}" else " (blank='send' sends it)"
                for name, series in zip(self.columns, columns, strict=True):
                    empty = _blank(series) & ~failed
                    errors.update((int(i), f"{self.field}: empty value in column {name!r} in this row{hint}")
                                  for i in np.flatnonzero(empty))
                    failed |= empty
        codes, first = _distinct(columns, failed)
        cells = [series.array for series in columns]
        if any(self.specs) and len(first):
            self._format([c[first[0]] for c in cells])  # a spec that fits no cell fails before any send
        if self.format is None:
            keys = self.keys

            def value(job: int) -> Any:
                row = first[job]
                return {k: json_value(c[row]) for k, c in zip(keys, cells, strict=True)}
        else:
            fmt, field = self.format, self.field

            def value(job: int) -> Any:
                row = first[job]
                args = [c[row] for c in cells]
                first_arg = args[0] if fmt == "{0}" else None
                text = first_arg if isinstance(first_arg, str) else self._format(args)
                if not text.strip():
                    raise InvalidRequest(field, "empty in this row")
                return text

        return Rows(codes, first, value, errors)

    def _format(self, cells: Sequence[Any]) -> str:
        """The text of one row; a format spec its cell cannot take ("{review:.2f}" on text) raises
        InvalidRequest naming the template and the column, not str.format's bare ValueError."""
        assert self.format is not None
        args = [json_value(c) for c in cells]
        try:
            return self.format.format(*args)
        except (ValueError, TypeError) as exc:
            column, spec, value = next(((c, s, a) for c, s, a in zip(self.columns, self.specs, args, strict=False)
                                        if s and not _formats(s, a)), (self.columns[0], "", args[0]))
            raise InvalidRequest(self.field, f"template {self.source!r}: the format spec {spec!r} does not "
                                             f"apply to column {column!r}, which holds {type(value).__name__} "
                                             f"values ({exc}); drop the spec or convert the column") from None

    def render(self, frame: pd.DataFrame, *, blank: str = "fail") -> Rendered:
        """Every row's value as a list (small frames, tests); `rows` is the lazy form runs use."""
        rows = self.rows(frame, blank=blank)
        values: list[Any] = []
        errors = dict(rows.errors)
        for position, job in enumerate(rows.codes):
            try:
                values.append(rows.value(int(job)) if job >= 0 else None)
            except InvalidRequest as exc:
                errors[position] = str(exc)
                values.append(None)
        return Rendered(values, errors)


@dataclass(frozen=True, slots=True)
class Rows:
    """A frame's rows as distinct values: why a million rows do not become a million Python strings.

    `codes[row]` numbers the row's distinct value (in order of first appearance; -1: the row failed,
    see `errors`), `first[code]` is the first row holding it, and `value(code)` renders it on demand,
    so a run keeps only integer arrays and the frame's own columns while it waits to send. Rows are
    the same value when the columns the template reads hold the same cells.
    """

    codes: np.ndarray
    first: np.ndarray
    value: Callable[[int], Any]
    errors: dict[int, str]

    def __len__(self) -> int:
        return len(self.first)

    @classmethod
    def of_values(cls, values: Sequence[Any], errors: Mapping[int, str] | None = None) -> Rows:
        """Rows from a plain list of values (hashable, or JSON-serialisable)."""
        errors = dict(errors or {})
        failed = np.zeros(len(values), dtype=bool)
        failed[list(errors)] = True
        codes, first = _distinct([list(values)], failed)
        return cls(codes, first, lambda j: values[first[j]], errors)

    def zip(self, other: Rows) -> Rows:
        """Rows whose value is the pair (this value, the other's value); a failure in either fails the row."""
        errors = {**other.errors, **self.errors}
        failed = (self.codes < 0) | (other.codes < 0)
        codes, first = _distinct_codes([self.codes, other.codes], failed)
        mine, theirs = self.codes, other.codes
        return Rows(codes, first, lambda j: (self.value(int(mine[first[j]])), other.value(int(theirs[first[j]]))),
                    errors)


def _hashable(value: Any) -> Any:
    """A cell as a dict key: missing values are one value (JSON null), lists and dicts their JSON."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, Mapping | list | np.ndarray):
        return json.dumps(json_value(value), sort_keys=True, default=str)
    return value


def _distinct(columns: Sequence[Any], failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): one code per distinct tuple of cells, numbered by first appearance; -1 if failed.

    Rows are hashed one at a time into an int64 array (8 bytes a row) and grouped with numpy, instead
    of keeping a dict of a million values, or letting `pd.factorize` turn an Arrow column into Python
    strings (~300 bytes a row). Rows that share a hash are compared cell by cell, so a hash collision
    gives two codes, never one wrong answer.
    """
    n = len(failed)
    cells = [getattr(c, "array", c) for c in columns]
    key = (lambda r: _hashable(cells[0][r])) if len(cells) == 1 else (
        lambda r: tuple(_hashable(c[r]) for c in cells))
    rows = cells[0] if len(cells) == 1 else zip(*cells, strict=True)
    if len(cells) == 1:
        hashes = np.fromiter((hash(_hashable(v)) for v in rows), dtype=np.int64, count=n)
    else:
        hashes = np.fromiter((hash(tuple(map(_hashable, row))) for row in rows), dtype=np.int64, count=n)
    kept = np.flatnonzero(~failed)
    _, first_pos, inverse = np.unique(hashes[kept], return_index=True, return_inverse=True)
    group_first = kept[first_pos]
    first_of_row = group_first[inverse.reshape(-1)]
    extra: dict[tuple[int, Any], int] = {}  # (hash group, key) -> its own first row, for collisions
    for position in np.flatnonzero(first_of_row != kept):
        row, head = int(kept[position]), int(first_of_row[position])
        if key(row) != key(head):  # a 64-bit collision: two values, one hash
            first_of_row[position] = extra.setdefault((head, key(row)), row)
    return _number(first_of_row, kept, n)


def _number(first_of_row: np.ndarray, kept: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes numbered by first appearance, from each kept row's first row."""
    first_rows, inverse = np.unique(first_of_row, return_inverse=True)  # sorted = first-appearance order
    codes = np.full(n, -1, dtype=np.intp)
    codes[kept] = inverse.reshape(-1)
    return codes, first_rows.astype(np.intp)


def _distinct_codes(parts: Sequence[np.ndarray], failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_distinct` for tuples of small non-negative integer codes: exact, no hashing."""
    n = len(failed)
    kept = np.flatnonzero(~failed)
    stacked = np.stack([np.asarray(p, dtype=np.int64)[kept] for p in parts], axis=1)
    _, first_pos, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    return _number(kept[first_pos][inverse.reshape(-1)], kept, n)


def _blank(series: pd.Series) -> np.ndarray:
    """Rows holding only whitespace (found again at render time, for whitespace regex misses)."""
    cells = series.array
    if _arrow_strings(series.dtype):
        import pyarrow.compute as pc  # Arrow strings: a boolean per row, no string copy

        blank = pc.fill_null(pc.match_substring_regex(cells.__arrow_array__(), r"^\s*$"), False)
        return np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool)
    return np.fromiter((isinstance(v, str) and not v.strip() for v in cells), dtype=bool, count=len(cells))


def _arrow_strings(dtype: Any) -> bool:
    """Strings stored by pyarrow, told by the dtype's storage: pandas 3's Python-backed string array has
    `__arrow_array__` too (it converts on demand), and a core install has no pyarrow to convert with."""
    return getattr(dtype, "storage", None) == "pyarrow" and pd.api.types.is_string_dtype(dtype)


def _column(frame: pd.DataFrame, column: str) -> pd.Series:
    series = frame[column] if column in frame.columns else frame[_by_text(frame, column)]
    if isinstance(series, pd.DataFrame):
        raise InvalidRequest(column, "this column name is used more than once in the frame")
    return series


def _formats(spec: str, value: Any) -> bool:
    """Whether a format spec (":.2f") applies to a value."""
    try:
        format(value, spec[1:])
    except (ValueError, TypeError):
        return False
    return True


def _compile(spec: str, known: set[str], field: str, names: list[str]) -> tuple[str, list[str], list[str]]:
    """The template as a positional format string, the columns it reads and each one's format spec."""
    out: list[str] = []
    used: list[str] = []
    specs: list[str] = []
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
            specs.append(spec_part)
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), used, specs


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
