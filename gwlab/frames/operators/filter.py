"""`df.gw.filter`: the rows whose condition's probability reaches a threshold, cascades included."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gwlab.errors import FilterWarning
from gwlab.frames import columns as tidy
from gwlab.frames.cascade.run import run_cascade
from gwlab.frames.cascade.spec import Cascade
from gwlab.frames.operators.shared import (
    OperatorFrame,
    OperatorSummary,
    check_text,
    check_threshold,
    finish,
    inner,
)
from gwlab.frames.run.config import RunConfig
from gwlab.frames.specs import DecideSpec

__all__ = ["FilterSpec", "filter_rows"]


@dataclass(frozen=True)
class FilterSpec:
    """A filter's settings beyond the run options, checked once."""

    condition: str
    state: Any = None  # default: every column, as a JSON object
    threshold: float = 0.5
    name: str = "condition"
    model: str | None = None
    cascade: Cascade | None = None

    def __post_init__(self) -> None:
        check_text(self.condition, "condition")
        check_threshold(self.threshold, "threshold")


async def filter_rows(frame: pd.DataFrame, spec: FilterSpec, config: RunConfig) -> OperatorFrame:
    """The rows whose condition's probability reaches `threshold`; `.answers` holds every row's. With a
    cascade (`gwlab.Cascade`), that one decide run is a cascade and a row is kept by its answer, the
    cheap model's where it was sure and the oracle's elsewhere."""
    name, threshold, cascade = spec.name, spec.threshold, spec.cascade
    question = {name: {"type": tidy.NOUL, "instructions": spec.condition}}
    asked = DecideSpec(list(frame.columns) if spec.state is None else spec.state, question, spec.model)
    if cascade is not None:
        answers = await run_cascade(frame, asked, cascade, inner(config))
    else:
        answers = await asked.run(frame, inner(config))
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
