"""Quality figures beside their trivial baselines, for the benchmarks that score answers against labels.

A yes/no answer is printed with the base rate, what always-yes and always-no would score, and its
accuracy, precision, recall and F1 on the positive class: an accuracy alone hides a filter that keeps
nothing (always-no scores the negative share). A routing (one class of several) is printed beside the
majority class's share. A distribution over seeds is printed as its median and 5-95 % range.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Binary:
    """Accuracy, precision, recall and F1 on the positive class of yes/no answers against labels."""

    n: int
    kept: int
    accuracy: float
    precision: float  # NaN when nothing was answered yes
    recall: float  # NaN when no label is yes
    f1: float

    @classmethod
    def of(cls, pred: Iterable[bool], truth: Iterable[bool]) -> Binary:
        p, t = np.asarray(list(pred), dtype=bool), np.asarray(list(truth), dtype=bool)
        if p.shape != t.shape:
            raise ValueError(f"pred: {p.size} answers for {t.size} labels")
        hit = int((p & t).sum())
        precision = hit / p.sum() if p.any() else float("nan")
        recall = hit / t.sum() if t.any() else float("nan")
        f1 = 2 * hit / (p.sum() + t.sum()) if p.any() or t.any() else float("nan")
        return cls(len(t), int(p.sum()), float((p == t).mean()), float(precision), float(recall), float(f1))

    def cells(self) -> str:
        """`| accuracy | precision | recall | F1 | yes |` cells of a markdown table."""
        return " | ".join(f"{v:.3f}" if v == v else "n/a" for v in
                          (self.accuracy, self.precision, self.recall, self.f1)) + f" | {self.kept}"


HEADER = "| accuracy | precision | recall | F1 (positive class) | answered yes |"


def baselines(truth: Iterable[bool]) -> list[tuple[str, Binary]]:
    """Always-no and always-yes scored as any answer is, and the base rate in the names."""
    t = np.asarray(list(truth), dtype=bool)
    return [(f"always no (base rate {t.mean():.3f})", Binary.of(np.zeros_like(t), t)),
            ("always yes", Binary.of(np.ones_like(t), t))]


def majority_share(labels: Iterable[object]) -> tuple[object, float]:
    """The most frequent label and its share: what answering it for every row scores."""
    values, counts = np.unique(np.asarray([str(v) for v in labels]), return_counts=True)
    return str(values[counts.argmax()]), float(counts.max() / counts.sum())


def spread(values: Iterable[float]) -> str:
    """Median [5 %, 95 %] of a distribution over seeds."""
    v = np.asarray(list(values), dtype=float)
    low, mid, high = np.percentile(v, [5, 50, 95])
    return f"{mid:.3g} [{low:.3g}, {high:.3g}]"
