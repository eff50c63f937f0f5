"""`gwlab.show_grounding`: a row's source text with each extracted value's span highlighted, as plain HTML.

No JavaScript and no widget: the view is static HTML in `_repr_html_`, so it shows in a saved notebook, on
GitHub and on Binder alike. Every text (source, values, field names, index labels) is escaped.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.grounding.columns import NOTES, span_column, status_column

__all__ = ["GroundingView", "show_grounding"]

PAGE = 10  # rows shown when none are named
_COLOURS = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa", "#a5f3fc", "#e5e7eb"]
_MARKS = {"exact": "✓ exact", "fuzzy": "≈ fuzzy", "not_found": "✗ not found",
          "misplaced": "✗ misplaced (written only as something else)"}
_GROUNDED = ("exact", "fuzzy")  # spans highlighted; a misplaced value's span is another field's kind of text


def show_grounding(frame: pd.DataFrame, rows: Any = None, *, source: str | None = None,
                   fields: Sequence[str] | None = None) -> GroundingView:
    """A view of grounded rows of a `df.gw.extract` result: each row's source text with each field's span
    highlighted, and a table of the values with their status (values not found or misplaced marked).

    Parameters
    ----------
    frame : DataFrame
        The result of ``df.gw.extract(..., grounding="flag" or "drop")`` (joined with its inputs).
    rows : label, list of labels or slice, optional
        Which rows (by index label, as ``.loc``); default: the first 10.
    source : str, optional
        The source column (default: the run's, from ``frame.attrs``).
    fields : list of str, optional
        The fields shown (default: every field with a ``{field}__grounding`` column).
    """
    source = source or ((frame.attrs.get("gwlab_run") or {}).get("grounding") or {}).get("source")
    if source is None or source not in frame.columns:
        raise InvalidRequest("source", f"the source text column (a column of the frame); got {source!r}")
    found = [str(c)[:-len("__grounding")] for c in frame.columns if str(c).endswith("__grounding")]
    fields = list(found if fields is None else fields)
    missing = [f for f in fields if status_column(f) not in frame.columns]
    if missing or not fields:
        raise InvalidRequest("fields", f"fields with grounding columns ({', '.join(found) or 'none'}); "
                                       f"got {missing or fields}")
    if rows is None:
        page = frame.iloc[:PAGE]
    else:
        page = frame.loc[rows]
        page = page.to_frame().T if isinstance(page, pd.Series) else page
    return GroundingView(page, source, fields)


class GroundingView:
    """Rows of source text with their fields' spans highlighted; `_repr_html_` is the whole view."""

    def __init__(self, frame: pd.DataFrame, source: str, fields: Sequence[str]) -> None:
        self.frame, self.source, self.fields = frame, source, list(fields)

    def _repr_html_(self) -> str:
        legend = " ".join(_chip(f, i) for i, f in enumerate(self.fields))
        parts = [f"<div style='font-family:sans-serif;font-size:90%'><div>{legend}</div>"]
        for label, row in self.frame.iterrows():
            parts.append(self._row(label, row))
        return "".join(parts) + "</div>"

    def __repr__(self) -> str:
        return f"GroundingView({len(self.frame)} rows, fields {self.fields}, source {self.source!r})"

    def _row(self, label: Any, row: pd.Series) -> str:
        text = row[self.source]
        text = "" if not isinstance(text, str) else text
        spans = [(row.get(span_column(f)), i, f) for i, f in enumerate(self.fields)
                 if str(row.get(status_column(f))) in _GROUNDED]
        marked = _highlight(text, [(s, i, f) for s, i, f in spans if isinstance(s, tuple | list) and len(s) == 2])
        table = "".join(self._value_row(row, f, i) for i, f in enumerate(self.fields))
        notes = row.get(NOTES)
        note = f"<div style='color:#b91c1c'>{html.escape(str(notes))}</div>" if isinstance(notes, str) else ""
        return (f"<div style='border-top:1px solid #ddd;padding:6px 0'><b>{html.escape(str(label))}</b>"
                f"<div style='white-space:pre-wrap;margin:4px 0'>{marked}</div>"
                f"<table style='font-size:90%'>{table}</table>{note}</div>")

    def _value_row(self, row: pd.Series, field: str, i: int) -> str:
        status = row.get(status_column(field))
        value = row.get(field)
        lost = str(status) in ("not_found", "misplaced")
        shown = _raw_value(row, field) if _missing(value) and lost else value
        if _missing(shown):
            return f"<tr><td>{_chip(field, i)}</td><td colspan=2 style='color:#6b7280'>no value</td></tr>"
        dropped = " (dropped)" if _missing(value) else ""
        style = "color:#b91c1c;font-weight:bold" if lost else ""
        mark = _MARKS.get(str(status), html.escape(str(status)))
        return (f"<tr><td>{_chip(field, i)}</td><td style='{style}'>{html.escape(str(shown))}</td>"
                f"<td style='{style}'>{mark}{dropped}</td></tr>")


def _highlight(text: str, spans: list[tuple[Any, int, str]]) -> str:
    """`text` escaped, each span's characters in a <mark> of its field's colour (overlaps: the first field)."""
    cuts = sorted({0, len(text), *(int(p) for s, _, _ in spans for p in s if 0 <= int(p) <= len(text))})
    out = []
    for start, end in itertools.pairwise(cuts):
        piece = html.escape(text[start:end])
        covering = [(i, f) for s, i, f in spans if int(s[0]) <= start and end <= int(s[1])]
        if covering:
            i, _ = covering[0]
            title = html.escape(", ".join(f for _, f in covering), quote=True)
            piece = f"<mark title=\"{title}\" style='background:{_COLOURS[i % len(_COLOURS)]}'>{piece}</mark>"
        out.append(piece)
    return "".join(out)


def _chip(field: str, i: int) -> str:
    return (f"<span style='background:{_COLOURS[i % len(_COLOURS)]};padding:0 4px'>"
            f"{html.escape(str(field))}</span>")


def _raw_value(row: pd.Series, field: str) -> Any:
    """A dropped value as the model wrote it (from `__raw`), else None."""
    raw = next((row[c] for c in row.index if str(c).endswith("__raw")), None)
    try:
        answer = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return answer.get(field) if isinstance(answer, dict) else None


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, list | tuple | dict) and bool(pd.isna(value)))
