"""`BatchFrame`: the accessor's result, a DataFrame that shows what its run did above the rows.

Only the frame the run returned carries the summary: anything derived from it (a selection, a copy)
is a plain DataFrame, so a summary never describes rows it no longer matches. The summary is also in
`.attrs["gwlab_run"]` as a plain dict, which survives pickling and Parquet.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, ClassVar, Self

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.run.outcome import RunSummary

__all__ = ["BatchFrame"]


class BatchFrame(pd.DataFrame):
    """A DataFrame with the `run` summary (rows, errors, cache hits, tokens, estimated cost, elapsed)."""

    _metadata: ClassVar[list[str]] = ["run", "_repeats"]
    run: RunSummary
    _repeats: pd.DataFrame | None = None

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame  # derived frames are plain: the summary describes this result only

    @classmethod
    def wrap(cls, frame: pd.DataFrame, summary: RunSummary, repeats: pd.DataFrame | None = None) -> Self:
        out = cls(frame)
        out.run = summary
        out._repeats = repeats
        out.attrs["gwlab_run"] = dataclasses.asdict(summary)
        return out

    def repeats_frame(self) -> pd.DataFrame:
        """Every repeat's answer of a `repeats=k` run: one row per (row, repeat), the row's index plus a
        `repeat` level (0..k-1), the input columns (with `join=True`), that repeat's answer columns,
        `__request_id` and `__status`. Pass it to `gwlab.evaluate`/`gwlab.compare` to score the
        repeats pooled or reduced (``reduce=``)."""
        if self._repeats is None:
            raise InvalidRequest("repeats", "this result was not run with repeats > 1; ask again with "
                                            "repeats=k (answers already checkpointed are not sent again)")
        return self._repeats.copy()

    def __repr__(self) -> str:
        summary = getattr(self, "run", None)
        return super().__repr__() + (f"\n{summary.text()}" if summary is not None else "")

    def _repr_html_(self) -> str | None:
        body: str | None = super()._repr_html_()  # type: ignore[misc]  # pandas-stubs leave out DataFrame._repr_html_
        summary = getattr(self, "run", None)
        if summary is None:
            return body
        lines = html.escape(summary.text()).replace("\n", "<br>")
        return f"<div style='font-family:monospace;font-size:90%;margin:4px 0'>{lines}</div>{body or ''}"

    def __reduce__(self) -> Any:
        return pd.DataFrame(self).__reduce__()  # pickles as a plain frame; attrs keep the summary
