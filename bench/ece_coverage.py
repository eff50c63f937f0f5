"""Coverage of the ECE interval (gwlab/stats/calibration_error.py) over calibrated and miscalibrated models,
beside the two intervals gwlab shipped before it, as a distribution over seeds.

    python bench/ece_coverage.py [--sims 400] [--seeds 3]    # ~2 min on one core; quoted in docs/evaluation.md

The model (bench/harness/coverage.py `calibration`): predictions uniform on [0, 1], labels true with
probability 0.5 + shrink (p - 0.5), ten equal-width bins; the population ECE is (1 - shrink) * 0.25.
"""

from __future__ import annotations

import argparse

import numpy as np
from harness.coverage import (  # bench/harness is on sys.path
    calibration,
    coverage,
    percentile_bootstrap_ece,
    union_bound_ece,
)

from gwlab.stats import calibration_error as ce

LEVEL = 0.95


def current(p: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, float]:
    return ce.interval(ce.binned(p, y), LEVEL, draws=4000, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400, help="simulated data sets per regime and seed")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    seeds = range(args.seeds)
    print(f"coverage at nominal {LEVEL}, {args.sims} data sets per seed, seeds {list(seeds)}; mean width")
    print("| rows | shrink | population ECE | interval (gwlab) | width | union bound (before) | width "
          "| percentile bootstrap (first) |")
    print("|---:|---:|---:|---|---:|---|---:|---|")
    for n in (300, 1000):
        for shrink in (1.0, 0.9, 0.85, 0.75, 0.5, 0.0):
            draw = calibration(n, shrink)
            cells = []
            for method in (current, union_bound_ece, percentile_bootstrap_ece):
                runs = [coverage(draw, method, args.sims, 1000 * s + n) for s in seeds]
                cells.append(f"{' / '.join(f'{r.rate:.3f}' for r in runs)}")
                if method is not percentile_bootstrap_ece:
                    cells.append(f"{np.mean([r.width for r in runs]):.3f}")
            print(f"| {n} | {shrink} | {(1 - shrink) * 0.25:.4f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
