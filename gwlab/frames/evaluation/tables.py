"""The tables an evaluation shows, as DataFrames: the confusion matrix, the reliability bins and their
ECE, the threshold sweep and the coverage curve. Definitions beside the numpy metrics they extend
(gwlab/stats/metrics.py); here only because they are frames.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gwlab.stats import metrics

__all__ = ["confusion", "coverage_curve", "ece", "reliability", "threshold_sweep"]


def confusion(y: np.ndarray, pred: np.ndarray, classes: list[str]) -> pd.DataFrame:
    """Counts with true classes as rows and predicted classes as columns."""
    k = len(classes)
    matrix = np.zeros((k, k), dtype=np.int64)
    ok = (y >= 0) & (pred >= 0)
    np.add.at(matrix, (y[ok], pred[ok]), 1)
    return pd.DataFrame(matrix, index=pd.Index(classes, name="truth"),
                        columns=pd.Index(classes, name="predicted"))


def reliability(proba: np.ndarray, y: np.ndarray, kind: str, bins: int = 10) -> pd.DataFrame:
    """Equal-width bins over [0, 1]; one row per bin with its count, mean prediction and observed rate.

    noul: the binned value is P(true) and `observed` the fraction of true labels (the classic binary
    reliability diagram). Choice and score: the top-label confidence, and `observed` the fraction of
    rows whose predicted class was right. The last bin is closed: a prediction of 1.0 falls in it.
    """
    value, hit = metrics.calibration_pairs(proba, y, kind)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, value, side="right") - 1, 0, bins - 1)
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=value, minlength=bins) / count
        observed = np.bincount(which, weights=hit, minlength=bins) / count
    return pd.DataFrame({"lower": edges[:-1], "upper": edges[1:], "count": count,
                         "mean_prob": mean_p, "observed": observed})


def ece(table: pd.DataFrame) -> float:
    """Expected calibration error: sum over bins of (count / n) * |observed - mean_prob|."""
    n = table["count"].sum()
    if not n:
        return float("nan")
    used = table[table["count"] > 0]
    return float((used["count"] * (used["observed"] - used["mean_prob"]).abs()).sum() / n)


def threshold_sweep(proba: np.ndarray, y: np.ndarray, steps: int = 21) -> pd.DataFrame:
    """noul: accuracy, precision, recall and F1 of `P(true) >= t` for t from 0 to 1."""
    rows = []
    truth = y == 1
    for t in np.linspace(0.0, 1.0, steps):
        said = proba[:, 1] >= t
        tp, fp, fn = np.sum(said & truth), np.sum(said & ~truth), np.sum(~said & truth)
        precision = tp / (tp + fp) if tp + fp else float("nan")
        recall = tp / (tp + fn) if tp + fn else float("nan")
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
        rows.append({"threshold": t, "accuracy": float(np.mean(said == truth)), "precision": precision,
                     "recall": recall, "f1": f1, "positive_rate": float(np.mean(said))})
    return pd.DataFrame(rows)


def coverage_curve(confidence: np.ndarray, correct: np.ndarray, steps: int = 20) -> pd.DataFrame:
    """Accuracy when answering only the most confident fraction of rows, for coverage 1/steps .. 1.

    The rest would go to a person: read it as "how right are we if we automate this share".
    `threshold` is the lowest confidence still answered at that coverage.
    """
    order = np.argsort(-confidence, kind="stable")
    hits = np.cumsum(correct[order])
    rows = []
    n = len(order)
    for coverage in np.linspace(1.0 / steps, 1.0, steps):
        k = max(1, round(coverage * n)) if n else 0
        rows.append({"coverage": coverage, "answered": k,
                     "accuracy": hits[k - 1] / k if k else float("nan"),
                     "threshold": float(confidence[order[k - 1]]) if k else float("nan")})
    return pd.DataFrame(rows)
