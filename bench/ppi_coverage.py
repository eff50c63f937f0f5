"""Coverage of the prediction-powered intervals (gwlab/stats/ppi.py) in their hard regimes, beside the
labelled-only width and the broken alternatives, as a distribution over seeds.

    python bench/ppi_coverage.py            # ~1 min on one core; figures quoted in docs/guide/labels.md

A model that overstates the share (truth 0.3; P(true) 0.75 on refunds, 0.3 otherwise, noise 0.15),
2,000 model answers, 30 / 50 / 80 labels; conversations of 5 rows sharing a tendency for the clustered
rows; IPW labels drawn towards uncertain rows by `labelling_probabilities`, and their labelled-only
figure (the weighted mean of the labels) also at a 5 % share.
"""

from __future__ import annotations

import numpy as np
from harness.coverage import (  # bench/harness is on sys.path
    conversations,
    coverage,
    drawn_labels,
    few_labels,
    horvitz_thompson_interval,
    ipw_interval,
    labels_only_interval,
    ppi_interval,
)

SIMS = 500


def main() -> None:
    seeds = range(3)
    print(f"coverage at nominal 0.95, {SIMS} simulations per seed, seeds {list(seeds)}")
    for n in (30, 50, 80):
        for lam in (None, 1.0):
            rows = [coverage(few_labels([n]), ppi_interval(lam), SIMS, s) for s in seeds]
            classical = np.mean([coverage(few_labels([n]), ppi_interval(0.0), SIMS, s).width for s in seeds])
            print(f"PPI++ lam={'tuned' if lam is None else lam} n={n}: coverage "
                  f"{[round(r.rate, 3) for r in rows]}, width {np.mean([r.width for r in rows]):.3f} "
                  f"(labelled-only {classical:.3f})")
    for k in (12, 24):
        print(f"clusters, {k} labelled conversations: clustered "
              f"{[coverage(conversations(k), ppi_interval(None, True), SIMS, s).rate for s in seeds]}, row-wise "
              f"{[coverage(conversations(k), ppi_interval(None, False), SIMS, s).rate for s in seeds]}")
    for budget in (30, 60):
        rows = [coverage(drawn_labels(budget), ipw_interval, SIMS, s) for s in seeds]
        print(f"active IPW, budget {budget}: coverage {[round(r.rate, 3) for r in rows]}, "
              f"width {np.mean([r.width for r in rows]):.3f}")
    for share, budget in ((0.3, 30), (0.3, 60), (0.05, 60), (0.05, 200)):
        for name, interval in (("the estimate (tuned lam)", ipw_interval),
                               ("weighted mean of the labels", labels_only_interval),
                               ("Horvitz-Thompson (before)", horvitz_thompson_interval)):
            rows = [coverage(drawn_labels(budget, share), interval, SIMS, s) for s in seeds]
            print(f"active, share {share}, budget {budget}, {name}: coverage "
                  f"{[round(r.rate, 3) for r in rows]}, width {np.mean([r.width for r in rows]):.3f}")


if __name__ == "__main__":
    main()
