"""Classification and calibration metrics over a probability matrix, written once for every question type.

Plain numpy, no scikit-learn and no pandas: the definitions are short and pinned here so a notebook's
numbers can be checked by hand (tests/frames/evaluation/test_evaluate.py does, on tiny examples). The
tables an evaluation shows (confusion matrix, reliability bins, threshold sweep, coverage curve) are
frames/evaluation/tables.py, built on these.
"""

from __future__ import annotations

import numpy as np

from gwlab.stats import calibration_error

EPS = 1e-15  # log-loss clips probabilities to [EPS, 1 - EPS], as scikit-learn did


def confidence(proba: np.ndarray) -> np.ndarray:
    """Per row, 1 - entropy / log K: the gateway's `confidence` (certainty of the distribution, not the
    probability of being right; docs/gateway.md), so a frame whose probabilities were recalibrated can say
    it again. 1 when one class takes everything, 0 when all are equal."""
    p = np.asarray(proba, dtype=float)
    if p.ndim != 2 or p.shape[1] < 2:
        return np.ones(len(p))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    scores: np.ndarray = 1.0 + terms.sum(axis=1) / np.log(p.shape[1])
    return scores


def accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(y == pred)) if len(y) else float("nan")


def macro_f1(y: np.ndarray, pred: np.ndarray, k: int) -> float:
    """Mean F1 over the classes that occur in the labels or the predictions (scikit-learn's choice)."""
    scores = []
    for c in range(k):
        tp = np.sum((y == c) & (pred == c))
        fp = np.sum((y != c) & (pred == c))
        fn = np.sum((y == c) & (pred != c))
        if tp + fp + fn == 0:
            continue  # a class nobody named: no evidence either way
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else float("nan")


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve: P(a true row scores above a false one), ties counting half (Mann-Whitney
    U / n_true n_false, from average ranks); NaN when either class is absent. Invariant under any increasing
    map of the scores, so it shows whether a calibration kept the ranking."""
    score, y = np.asarray(score, float), np.asarray(y, bool)
    n_true, n_false = int(y.sum()), int((~y).sum())
    if not n_true or not n_false:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    _, first, counts = np.unique(score[order], return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)  # tied scores share their average rank
    return float((ranks[y].sum() - n_true * (n_true + 1) / 2.0) / (n_true * n_false))


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """(p_o - p_e) / (1 - p_e): agreement beyond what the two marginals give by chance."""
    if not len(a):
        return float("nan")
    p_o = float(np.mean(a == b))
    values = np.union1d(a, b)
    p_e = float(sum(np.mean(a == v) * np.mean(b == v) for v in values))
    if p_e >= 1.0:
        return 1.0 if p_o >= 1.0 else float("nan")
    return (p_o - p_e) / (1.0 - p_e)


def brier(proba: np.ndarray, y: np.ndarray, kind: str) -> float:
    """noul: mean (p - y)^2 on P(true). Choice and score: mean over rows of sum_k (p_k - [y = k])^2."""
    if not len(y):
        return float("nan")
    if kind == "noul":
        return float(np.mean((proba[:, 1] - (y == 1)) ** 2))
    onehot = np.eye(proba.shape[1])[np.clip(y, 0, None)] * (y >= 0)[:, None]
    return float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))


def log_loss(proba: np.ndarray, y: np.ndarray) -> float:
    """-mean log p(true class); a label outside the classes counts as probability EPS."""
    if not len(y):
        return float("nan")
    p = np.where(y >= 0, proba[np.arange(len(y)), np.clip(y, 0, None)], 0.0)
    return float(-np.mean(np.log(np.clip(p, EPS, 1 - EPS))))


def calibration_pairs(proba: np.ndarray, y: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """What calibration is measured on, per row: (P(true), label is true) for noul, (top-label confidence,
    top label is right) for choice and score."""
    if kind == "noul":
        return proba[:, 1], (y == 1).astype(float)
    return proba.max(axis=1), (proba.argmax(axis=1) == y).astype(float)


def ece_debiased(proba: np.ndarray, y: np.ndarray, kind: str, bins: int = 10) -> float:
    """Kumar et al.'s debiased binned ECE (gwlab/stats/calibration_error.py): the plug-in `ece` less an
    estimate of its upward bias (it removes part of it: a calibrated model's 0.059 reads 0.036 on 300 rows)."""
    return calibration_error.debiased(calibration_error.binned(*calibration_pairs(proba, y, kind), bins))
