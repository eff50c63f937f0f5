"""Coverage of the ECE interval (gwlab/stats/calibration_error.py) over calibrated and miscalibrated models,
beside the two intervals gwlab shipped before it, as a distribution over seeds.

    python bench/ece_coverage.py [--sims 400] [--seeds 3] [--part coverage bias]    # quoted in docs/evaluation.md

`bias`: the plug-in's and the debiased estimate's mean on a calibrated model (200 data sets).

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
    parser.add_argument("--part", nargs="+", choices=["coverage", "bias"], default=["coverage", "bias"])
    args = parser.parse_args()
    if "bias" in args.part:
        bias()
    if "coverage" in args.part:
        table(args.sims, range(args.seeds))


def bias(sets: int = 200) -> None:
    """What a calibrated model (ECE 0) reads, on average: the plug-in's upward bias, the debiased estimate's."""
    for n in (300, 1000):
        draw, rng = calibration(n, 1.0), np.random.default_rng(n)
        bins = [ce.binned(*draw(rng, i)[1][:2]) for i in range(sets)]
        plug, deb = np.mean([ce.plugin(b) for b in bins]), np.mean([ce.debiased(b) for b in bins])
        print(f"calibrated model, {n} rows, {sets} data sets: mean plug-in ECE {plug:.3f}, mean debiased {deb:+.3f}")


def table(sims: int, seeds: range) -> None:
    print(f"coverage at nominal {LEVEL}, {sims} data sets per seed, seeds {list(seeds)}; mean width")
    print("| rows | shrink | population ECE | interval (gwlab) | width | union bound (before) | width "
          "| percentile bootstrap (first) |")
    print("|---:|---:|---:|---|---:|---|---:|---|")
    for n in (300, 1000):
        for shrink in (1.0, 0.9, 0.85, 0.75, 0.5, 0.0):
            draw = calibration(n, shrink)
            cells = []
            for method in (current, union_bound_ece, percentile_bootstrap_ece):
                runs = [coverage(draw, method, sims, 1000 * s + n) for s in seeds]
                cells.append(f"{' / '.join(f'{r.rate:.3f}' for r in runs)}")
                if method is not percentile_bootstrap_ece:
                    cells.append(f"{np.mean([r.width for r in runs]):.3f}")
            print(f"| {n} | {shrink} | {(1 - shrink) * 0.25:.4f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
