"""`gwlab.compare_sequential`: answer rows with A and B in rounds and stop paying once the paired
difference in accuracy is resolved, with the anytime-valid sequence of `gwlab/stats/sequential.py`.

Each round sends the next `round_rows` rows (in a seeded random order, so early rounds are a random
sample) to both sides; a row counts once both answered it and it has a label. The run stops when the
sequence excludes [-margin, margin] (B better or worse by more than `margin`), when it sits inside
(-margin, margin) (the sides are within `margin`: only with margin > 0), or when the budget ends. Looking
after every round is what the sequence allows; a fixed-n interval looked at this way would not keep its
level. What it does not promise: a difference on rows outside the frame, or on another metric.

`gwlab.compare(a, b, truth, sequential=gwlab.Sequential(rows=df, ...))` is the same run under compare's
name (`a`, `b` then answer a chunk of rows; compare's `level` is 1 - alpha).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.stats.sequential import confidence_sequence

__all__ = ["Sequential", "SequentialComparison", "compare_sequential", "run_sequential"]

Answerer = Callable[[pd.DataFrame], pd.Series]


@dataclass(frozen=True)
class Sequential:
    """How `gwlab.compare(..., sequential=...)` sends rows: from `rows` in rounds of `round_rows`, at most
    `budget` rows (None: all), stopping once B - A is resolved beyond `margin`; `seed` orders the rows."""

    rows: pd.DataFrame
    round_rows: int = 50
    budget: int | None = None
    margin: float = 0.0
    seed: int = 0

    def __repr__(self) -> str:  # not the rows' whole table
        return (f"Sequential({len(self.rows)} rows, round_rows={self.round_rows}, budget={self.budget}, "
                f"margin={self.margin}, seed={self.seed})")


def run_sequential(a: Any, b: Any, truth: Any, options: Sequential, alpha: float) -> SequentialComparison:
    """compare's sequential form: `a`, `b` answerers, `truth` a column of `options.rows` or a Series like it."""
    if not isinstance(options, Sequential):
        raise InvalidRequest("sequential", f"a gwlab.Sequential(rows=..., ...); got {type(options).__name__}")
    if not isinstance(options.rows, pd.DataFrame):
        raise InvalidRequest("sequential.rows", "the DataFrame of rows to send in rounds")
    for name, side in (("a", a), ("b", b)):
        if not callable(side):
            raise InvalidRequest(name, "with sequential=, a function answering a chunk of rows "
                                       "(e.g. lambda rows: rows.gw.decide(...)['q__choice'])")
    rows = options.rows
    if isinstance(truth, pd.Series):
        rows, truth = rows.assign(__truth__=truth.reindex(rows.index)), "__truth__"
    if not isinstance(truth, str):
        raise InvalidRequest("truth", "with sequential=, a label column of the rows or a Series indexed like them")
    return compare_sequential(rows, a, b, truth, round_rows=options.round_rows,
                              budget=options.budget, alpha=alpha, margin=options.margin, seed=options.seed)


@dataclass(frozen=True)
class SequentialComparison:
    """Where the comparison stopped: rows used, the last bounds on accuracy(B) - accuracy(A), the decision."""

    rows: int
    low: float
    high: float
    decision: str  # "b better" | "a better" | "within margin" | "unresolved"
    trace: pd.DataFrame  # per round: rows, low, high

    def __repr__(self) -> str:
        return (f"SequentialComparison({self.decision} after {self.rows} rows; "
                f"B - A in [{self.low:+.3f}, {self.high:+.3f}])")


def compare_sequential(frame: pd.DataFrame, a: Answerer, b: Answerer, truth: str, *, round_rows: int = 50,
                       budget: int | None = None, alpha: float = 0.05, margin: float = 0.0,
                       seed: int = 0) -> SequentialComparison:
    """`a` / `b` answer a chunk of `frame` (e.g. ``lambda rows: rows.gw.decide(...)["q__choice"]``), a
    Series indexed like the chunk; answers equal to `truth` (compared as text, case and spaces folded)
    count right."""
    if truth not in frame.columns:
        raise InvalidRequest("truth", f"unknown column {truth!r}")
    if round_rows < 1:
        raise InvalidRequest("round_rows", "at least 1")
    budget = len(frame) if budget is None else min(budget, len(frame))
    order = frame.index[np.random.default_rng(seed).permutation(len(frame))][:budget]
    diffs: list[float] = []
    trace = []
    for start in range(0, budget, round_rows):
        chunk = frame.loc[order[start:start + round_rows]]
        diffs.extend(_differences(chunk, a(chunk), b(chunk), truth))
        if not diffs:
            continue
        cs = confidence_sequence(np.array(diffs), alpha=alpha, horizon=budget)
        low, high = float(cs.low[-1]), float(cs.high[-1])
        trace.append({"rows": start + len(chunk), "low": low, "high": high})
        decision = _decision(low, high, margin)
        if decision != "unresolved":
            break
    if not trace:
        raise InvalidRequest("truth", "no row had a label and both answers")
    last = trace[-1]
    return SequentialComparison(int(last["rows"]), last["low"], last["high"],
                                _decision(last["low"], last["high"], margin), pd.DataFrame(trace))


def _fold(values: pd.Series) -> pd.Series:
    return values.astype("string").str.strip().str.casefold()


def _differences(chunk: pd.DataFrame, a: pd.Series, b: pd.Series, truth: str) -> list[float]:
    labels = chunk[truth]
    keep = labels.notna() & a.reindex(chunk.index).notna() & b.reindex(chunk.index).notna()
    right_a = _fold(a.reindex(chunk.index)[keep]) == _fold(labels[keep])
    right_b = _fold(b.reindex(chunk.index)[keep]) == _fold(labels[keep])
    return (right_b.astype(float) - right_a.astype(float)).tolist()


def _decision(low: float, high: float, margin: float) -> str:
    if low > margin:
        return "b better"
    if high < -margin:
        return "a better"
    if margin > 0 and -margin < low and high < margin:
        return "within margin"
    return "unresolved"
