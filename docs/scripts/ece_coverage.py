"""Print the figures docs/evaluation.md gives for the ECE: the plug-in's bias on a calibrated model, and how
often each interval covers the population ECE (200 seeded data sets per regime).

Model: predictions uniform on [0, 1], labels true with probability 0.5 + shrink (p - 0.5); with ten
equal-width bins the population ECE is (1 - shrink) / 4 exactly. Run: `python docs/scripts/ece_coverage.py`.
"""

from __future__ import annotations

import numpy as np

from gwlab.stats import calibration_error as ce

SEEDS, LEVEL = 200, 0.95


def sample(rng: np.random.Generator, n: int, shrink: float) -> tuple[np.ndarray, np.ndarray]:
    p = rng.random(n)
    return p, (rng.random(n) < 0.5 + shrink * (p - 0.5)).astype(float)


def percentile_bootstrap(p: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The interval gwlab gave before: a percentile bootstrap of the plug-in (400 resamples)."""
    n, r = len(p), 400
    which = np.clip(np.searchsorted(np.linspace(0, 1, 11), p, side="right") - 1, 0, 9)
    drawn = rng.integers(0, n, size=(r, n))
    cell = (np.arange(r)[:, None] * 10 + which[drawn]).ravel()
    values = np.abs(np.bincount(cell, (y - p)[drawn].ravel(), r * 10).reshape(r, 10)).sum(axis=1) / n
    low, high = np.quantile(values, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(low), float(high)


def main() -> None:
    for n in (300, 1000):
        for shrink in (1.0, 0.85, 0.75):
            rng, truth = np.random.default_rng(n), (1 - shrink) / 4
            plug, deb, new, old = [], [], 0, 0
            for seed in range(SEEDS):
                p, y = sample(rng, n, shrink)
                b = ce.binned(p, y)
                plug.append(ce.plugin(b))
                deb.append(ce.debiased(b))
                low, high = ce.interval(b, LEVEL, seed=seed)
                new += low <= truth <= high
                low, high = percentile_bootstrap(p, y, rng)
                old += low <= truth <= high
            print(f"n={n:5d} population ECE {truth:.4f}: mean plug-in {np.mean(plug):.4f}, mean debiased "
                  f"{np.mean(deb):+.4f}; 95% interval covers {new / SEEDS:.1%}, old bootstrap {old / SEEDS:.1%}")


if __name__ == "__main__":
    main()
