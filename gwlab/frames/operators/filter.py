"""`df.gw.filter`: the rows whose condition's probability reaches a threshold, cascades included."""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd

from gwlab.errors import FilterWarning
from gwlab.frames import columns as tidy
from gwlab.frames.operators.shared import (
    OperatorFrame,
    OperatorSummary,
    check_text,
    check_threshold,
    finish,
    own_options,
)

__all__ = ["filter_rows"]

async def filter_rows(frame: pd.DataFrame, condition: str, state: Any, threshold: float, name: str,
                      model: str | None, options: dict[str, Any], cascade: Any = None) -> OperatorFrame:
    """The rows whose condition's probability reaches `threshold`; `.answers` holds every row's. With a
    cascade (`gwlab.Cascade`), that one decide run is a cascade and a row is kept by its answer, the
    cheap model's where it was sure and the oracle's elsewhere."""
    check_text(condition, "condition")
    check_threshold(threshold, "threshold")
    own, config = own_options(options)
    question = {name: {"type": tidy.NOUL, "instructions": condition}}
    spec = list(frame.columns) if state is None else state
    answers = await frame.gw.adecide(spec, question, model=model, cascade=cascade, **own, join=False)
    probability = answers[tidy.column(name, tidy.NOUL)]
    keep = (probability >= threshold).to_numpy()  # NaN (an error row) is never kept
    shown = [tidy.column(name, tidy.NOUL)]
    if cascade is not None:  # the cascade's answer decides: a missing one (unpaid, failed) is never kept
        keep = answers[tidy.column(name, tidy.ANSWER)].map(lambda v: v is True or v == True).to_numpy(dtype=bool)  # noqa: E712
        shown += [tidy.column(name, tidy.ANSWER), tidy.column(name, tidy.SOURCE)]
    summary = OperatorSummary("filter", rows=len(frame), kept=int(keep.sum()))
    summary.add(answers.run)
    _warn_none_kept(summary, probability, threshold)
    out = finish(frame, answers[shown], config)
    return OperatorFrame.of(out[keep], summary, pd.DataFrame(answers))


def _warn_none_kept(summary: OperatorSummary, probability: pd.Series, threshold: float) -> None:
    """No row passing is rarely what the user meant: say so, with the highest probability seen."""
    if summary.kept or not summary.rows:
        return
    top = probability.max()
    seen = f"the highest P(true) is {top:.2f}" if top == top else "no row was answered"
    warnings.warn(f"filter kept 0 of {summary.rows} rows: {seen}, below threshold={threshold}; see .answers "
                  "for every row's probability", FilterWarning, stacklevel=4)
