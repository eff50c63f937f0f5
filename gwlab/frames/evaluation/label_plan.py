"""`gwlab.label_plan`: the rows to label next, drawn with recorded probabilities that favour the model's
uncertain rows, and how many labels (and model rows) reach a target interval width at what cost.

The draw is `gwlab/stats/active.py`'s. Rows already labelled in `truth` keep probability 1 (they are in
the labelled set whatever happens, which keeps the inverse-probability-weighted estimate unbiased as
long as they were not chosen by their labels); the budget goes to the others. Store `probabilities` as a
column and give it to `gwlab.estimate(..., label_prob=...)` once the drawn rows have labels: an estimate
that ignored the probabilities would over-count the uncertain rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import boolean
from gwlab.frames.evaluation.targets import probability_columns
from gwlab.stats.active import Plan, labelling_probabilities, plan_sizes
from gwlab.stats.ppi import tuned_lambda

__all__ = ["LabelPlan", "PlanOptions", "label_plan"]


@dataclass(frozen=True)
class PlanOptions:
    """What the planner prices: a target interval half-width and the cost of a label and a model row."""

    half_width: float | None = None
    cost_per_label: float = 1.0
    cost_per_row: float = 0.0  # the run's cost per row (its ledger), 0 when the rows are already paid for
    level: float = 0.95


@dataclass(frozen=True)
class LabelPlan:
    """`rows`: the frame's index of the rows to label, most uncertain first; `probabilities`: every row's
    chance of being drawn (1 for rows already labelled), to keep as the `label_prob` column."""

    rows: pd.Index
    probabilities: pd.Series
    sizes: Plan | None  # None without a target width or without two labels to read the spread from

    def __repr__(self) -> str:
        sizes = "" if self.sizes is None else (f"; for the target width: {self.sizes.labels} labels with "
                                               f"{self.sizes.rows} model rows, cost {self.sizes.cost:g}")
        return f"LabelPlan({len(self.rows)} rows to label{sizes})"


def label_plan(frame: pd.DataFrame, prob: str, *, budget: int, truth: str | None = None, seed: int = 0,
               options: PlanOptions | None = None) -> LabelPlan:
    """Draw about `budget` rows to label among those without a label in `truth`, favouring rows whose
    model P(answer) in `prob` (a noul question or one probability column) is least sure; with
    `options.half_width`, plan the labels and model rows that reach it (from the labels in `truth`).

    >>> plan = gwlab.label_plan(df, "refund", budget=40, truth="label")   # doctest: +SKIP
    >>> df["label_prob"] = plan.probabilities
    """
    options = options or PlanOptions()
    _, kind, columns = probability_columns(frame, prob)
    if kind != "noul":
        raise InvalidRequest("prob", "a noul question or one probability column (e.g. 'kind__p__refund')")
    p = pd.to_numeric(frame[columns["true"]], errors="coerce").to_numpy(np.float64)
    labelled = np.zeros(len(frame), dtype=bool) if truth is None else _labelled(frame, truth)
    open_rows = ~labelled & ~np.isnan(p)
    if not 0 < budget <= open_rows.sum():
        raise InvalidRequest("budget", f"between 1 and the {int(open_rows.sum())} rows without a label")
    pi = np.where(labelled, 1.0, 0.0)
    pi[open_rows] = labelling_probabilities(p[open_rows], budget)
    drawn = open_rows & (np.random.default_rng(seed).random(len(frame)) < pi)
    order = np.argsort(np.abs(p[drawn] - 0.5), kind="stable")  # closest to 0.5 first
    rows = frame.index[np.flatnonzero(drawn)[order]]
    sizes = _sizes(frame, truth, p, labelled, options) if options.half_width is not None else None
    return LabelPlan(rows, pd.Series(pi, index=frame.index, name="label_prob"), sizes)


def _labelled(frame: pd.DataFrame, truth: str) -> np.ndarray:
    if truth not in frame.columns:
        raise InvalidRequest("truth", f"unknown column {truth!r}")
    return frame[truth].notna().to_numpy()


def _sizes(frame: pd.DataFrame, truth: str | None, p: np.ndarray, labelled: np.ndarray,
           options: PlanOptions) -> Plan | None:
    """The planner's variances from the labels in hand (read as yes/no by the label reader's rules)."""
    if truth is None:
        return None
    keep = labelled & ~np.isnan(p)
    y = np.array([boolean(v) for v in frame[truth].to_numpy()[keep]], dtype=object)
    read = np.array([v is not None for v in y])
    if read.sum() < 2:
        return None
    y_read, yhat = y[read].astype(np.float64), p[keep][read]
    unl = p[~labelled & ~np.isnan(p)]
    lam = tuned_lambda(y_read, yhat, unl)
    assert options.half_width is not None  # sizes are planned only for a half-width asked for
    return plan_sizes(float(np.var(y_read - lam * yhat)), lam**2 * float(np.var(np.concatenate([yhat, unl]))),
                      options.half_width, level=options.level, cost_per_label=options.cost_per_label,
                      cost_per_row=options.cost_per_row, current_rows=int((~np.isnan(p)).sum()))
