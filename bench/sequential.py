"""Rows to a decision: the paired-difference confidence sequence (gwlab/stats/sequential.py) against the
fixed-size paired z-test of equal power, on a true 3-point difference, as a distribution over seeds.

    python bench/sequential.py          # ~20 s; figures in docs/benchmarks.md

Each row: B right and A wrong with 0.13, A right and B wrong with 0.10 (a 3-point difference), else a
tie. The sequence is looked at after every row and stops once it excludes 0 or the budget ends; the
fixed test's n is the normal power formula at the power the sequence reached. The A/A line is the
type-I error over 2,000 comparisons (nominal 0.05).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from gwlab.stats.sequential import confidence_sequence

SIMS = 500
B_ONLY, A_ONLY = 0.13, 0.10


def _paired(rng: np.random.Generator, sims: int, rows: int, b_only: float, a_only: float) -> np.ndarray:
    u = rng.random((sims, rows))
    return np.where(u < b_only, 1.0, np.where(u < b_only + a_only, -1.0, 0.0))


def run(seed: int, budget: int, horizon: int) -> tuple[float, float, float]:
    """(power, mean rows to a decision, fixed-n of equal power)."""
    cs = confidence_sequence(_paired(np.random.default_rng(seed), SIMS, budget, B_ONLY, A_ONLY), horizon=horizon)
    decided = (cs.low > 0) | (cs.high < 0)
    rows = np.where(decided.any(axis=1), decided.argmax(axis=1) + 1, budget)
    power = float(decided.any(axis=1).mean())
    effect, var = B_ONLY - A_ONLY, B_ONLY + A_ONLY - (B_ONLY - A_ONLY) ** 2
    z = NormalDist().inv_cdf
    fixed = (z(0.975) + z(min(power, 0.999))) ** 2 * var / effect**2
    return power, float(rows.mean()), fixed


def main() -> None:
    seeds = range(3)
    print(f"3-point paired difference, {SIMS} comparisons per seed, seeds {list(seeds)}")
    for budget, horizon in ((4000, 2000), (6000, 2500), (8000, 3000)):
        rows = [run(s, budget, horizon) for s in seeds]
        print(f"budget {budget}, horizon {horizon}: power {[round(r[0], 3) for r in rows]}, "
              f"mean rows {[round(r[1]) for r in rows]}, fixed-n of equal power {[round(r[2]) for r in rows]}, "
              f"rows saved {[f'{1 - r[1] / r[2]:.0%}' for r in rows]}")
    for seed in seeds:
        cs = confidence_sequence(_paired(np.random.default_rng(100 + seed), 2000, 3000, 0.12, 0.12), horizon=1000)
        print(f"A/A seed {seed}: type-I {((cs.low > 0) | (cs.high < 0)).any(axis=1).mean():.4f} (nominal 0.05)")


if __name__ == "__main__":
    main()
