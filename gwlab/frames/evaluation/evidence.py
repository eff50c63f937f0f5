"""Intervals for `gwlab.evaluate`'s tables: per-question metric intervals, reliability-bin intervals, display.

Kept apart from `evaluate.py` so the point estimates there stay as they were: this module only adds
columns (`{metric}_low`, `{metric}_high`, `small`) computed by `stats/intervals.py`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.targets import Target
from gwlab.stats import calibration_error, intervals, metrics

METRICS = ("accuracy", "macro_f1", "kappa", "brier", "log_loss", "ece", "mae")
# the binned ECE's interval (gwlab/stats/calibration_error.py): a bootstrap of it never covers a calibrated model
ECE_METHOD = "plug-in +/- the level quantile of its bins' summed noise (covers ECE 0 at the level, wider elsewhere)"


def methods(resamples: int, seed: int, clustered: bool = False) -> dict[str, str]:
    """How each metric's interval is computed, as the evaluation states it."""
    if clustered:  # repeats pooled: Wilson would count each repeat as a new row
        return dict.fromkeys(METRICS, f"cluster bootstrap over rows, their repeats drawn together ({resamples} "
                                      f"resamples, seed {seed})")
    boot = f"percentile bootstrap over rows ({resamples} resamples, seed {seed})"
    return {m: "Wilson score" if m == "accuracy" else ECE_METHOD if m == "ece" else boot for m in METRICS}


def target_sums(t: Target, bins: int) -> intervals.RowSums:
    """`RowSums` of one question, MAE as `evaluate` defines it (expected level against the label's level)."""
    abs_error = None
    if t.kind == "score" and (t.proba is not None or len(t.y)):
        levels = np.array([float(c) for c in t.classes])
        expected = t.proba @ levels if t.proba is not None else levels[np.clip(t.pred, 0, None)]
        abs_error = np.abs(expected - levels[t.y])
    return intervals.row_sums(t.y, t.pred, len(t.classes), t.proba, t.kind, bins, abs_error)


def interval_columns(targets: Sequence[Target], n_rows: int, *, level: float, bins: int, resamples: int,
                     seed: int, clusters: np.ndarray | None = None) -> pd.DataFrame:
    """Per question: `{m}_low`/`{m}_high` for every metric and `small`; one shared set of resamples.

    With `clusters` (each frame row's cluster: the repeats of one row) every interval is a cluster
    bootstrap, the confusion counts included (as one-hot columns summed with the cluster weights).
    """
    sums = [target_sums(t, bins) for t in targets]
    cells = [s.n_cells if clusters is not None else 0 for s in sums]
    widths = np.cumsum([0, *(s.columns.shape[1] + c for s, c in zip(sums, cells, strict=True))])
    columns = np.zeros((n_rows, widths[-1]))
    for t, s, start, c in zip(targets, sums, widths, cells, strict=False):
        stop = start + s.columns.shape[1]
        columns[t.positions, start:stop] = s.columns
        if c:
            columns[t.positions, stop + s.cells] = 1.0
    resampled = intervals.bootstrap_sums(columns, resamples, seed, clusters)
    rows = []
    for t, s, start, c in zip(targets, sums, widths[:-1], cells, strict=True):
        stop = start + s.columns.shape[1]
        if c:
            counts = resampled[:, stop:stop + c]
        else:
            (counts,) = intervals.bootstrap_counts([s], resamples, seed)
        values = s.metrics(counts, resampled[:, start:stop])
        drawn = len(t.y) if clusters is None else len(np.unique(clusters[t.positions]))  # what is resampled
        row: dict[str, object] = {"question": t.question, "small": drawn < intervals.MIN_ROWS}
        for name in METRICS:
            low, high = intervals.percentile(values[name], level) if name in values else (np.nan, np.nan)
            row |= {f"{name}_low": low, f"{name}_high": high}
        if clusters is None and t.proba is not None:
            b = calibration_error.binned(*metrics.calibration_pairs(t.proba, t.y, t.kind), bins)
            row["ece_low"], row["ece_high"] = calibration_error.interval(b, level, seed=seed)
        if clusters is None:
            hit_low, hit_high = intervals.wilson(int(np.sum(t.y == t.pred)), len(t.y), level)
            row |= {"accuracy_low": float(hit_low), "accuracy_high": float(hit_high)}
        rows.append(row)
    return pd.DataFrame(rows).set_index("question")


def warn_small(table: pd.DataFrame) -> None:
    """One warning naming every row of `table` (question, or question and slice) with too few rows."""
    small = table.index[table["small"].astype(bool)]
    if len(small):
        shown = ", ".join(f"{key!r} (n={int(n)})" for key, n in zip(small, table.loc[small, "n"], strict=True))
        warnings.warn(f"fewer than {intervals.MIN_ROWS} rows, intervals are wide and approximate: {shown}",
                      EvaluationWarning, stacklevel=3)


def reliability_intervals(table: pd.DataFrame, level: float) -> pd.DataFrame:
    """The reliability table with a Wilson interval on each bin's observed rate (`observed_low/high`)."""
    count = table["count"].to_numpy(float)
    hits = np.round(np.nan_to_num(table["observed"].to_numpy(float)) * count)
    low, high = intervals.wilson(hits, count, level)
    return table.assign(observed_low=np.where(count > 0, low, np.nan), observed_high=np.where(count > 0, high, np.nan))


def display(table: pd.DataFrame) -> pd.DataFrame:
    """Metrics with intervals as text, `0.728 [0.676, 0.775]`, for reprs (the table itself stays numeric)."""
    out = table.copy()
    for name in METRICS:
        if name not in out.columns or f"{name}_low" not in out.columns:
            continue
        out[name] = [_shown(v, lo, hi) for v, lo, hi in zip(out[name], out[f"{name}_low"], out[f"{name}_high"],
                                                           strict=True)]
        out = out.drop(columns=[f"{name}_low", f"{name}_high"])
    if "small" in out.columns and not out["small"].astype(bool).any():
        out = out.drop(columns="small")
    return out


def _shown(value: float, low: float, high: float) -> str:
    if value != value:
        return "–"
    if low != low:
        return f"{value:.3f}"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"
