"""Figures of docs/evaluation.md's "Uncertainty" section: how wide an accuracy interval is, and what a
paired comparison says about a three-point difference. Synthetic, seeded answers: no gateway needed.

    python docs/scripts/evaluation_intervals.py
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

import gwlab
from gwlab.stats import intervals


def widths() -> list[str]:
    """Wilson 95 % intervals of an accuracy of about 0.728 on the full set and on 40 rows."""
    lines = []
    for right, n in ((227, 312), (29, 40)):
        low, high = intervals.wilson(right, n, 0.95)
        lines.append(f"accuracy {right}/{n} = {right / n:.3f}: 95% Wilson interval [{low:.3f}, {high:.3f}] "
                     f"(+/- {(high - low) / 2:.3f})")
    return lines


def three_points(n: int = 312, seed: int = 0) -> str:
    """Two synthetic models on the same n rows, B right on about three points more of them."""
    rng = np.random.default_rng(seed)
    truth = pd.Series(rng.uniform(size=n) < 0.5, name="urgent")
    right_a = rng.uniform(size=n) < 0.72
    right_b = right_a.copy()
    flip = rng.choice(np.flatnonzero(~right_a), size=round(0.03 * n) + 6, replace=False)
    back = rng.choice(np.flatnonzero(right_a), size=6, replace=False)
    right_b[flip], right_b[back] = True, False
    a, b = (pd.Series(np.where(r, truth, ~truth), name="urgent") for r in (right_a, right_b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gwlab.compare(a, b, truth=truth).verdict


def report() -> str:
    return "\n".join([*widths(), three_points()])


if __name__ == "__main__":
    print(report())
    sys.exit(0)
