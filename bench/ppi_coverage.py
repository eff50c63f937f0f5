"""Coverage of the prediction-powered intervals (gwlab/stats/ppi.py) in their hard regimes, beside the
labelled-only width and the broken alternatives, as a distribution over seeds.

    python bench/ppi_coverage.py            # ~1 min on one core; figures quoted in docs/guide/labels.md

A model that overstates the share (truth 0.3; P(true) 0.75 on refunds, 0.3 otherwise, noise 0.15),
2,000 model answers, 30 / 50 / 80 labels; conversations of 5 rows sharing a tendency for the clustered
rows; IPW labels drawn towards uncertain rows by `labelling_probabilities`.
"""

from __future__ import annotations

import numpy as np
from harness.coverage import conversations, coverage, drawn_labels, few_labels  # bench/harness is on sys.path

from gwlab.stats.ppi import ipw_mean, ppi_mean

SIMS = 500


def _ppi(lam: float | None, clustered: bool = False):  # type: ignore[no-untyped-def]
    def interval(y, h, u, clusters=None, clusters_unlabelled=None):  # type: ignore[no-untyped-def]
        ids = {"clusters": clusters, "clusters_unlabelled": clusters_unlabelled} if clustered else {}
        r = ppi_mean(y, h, u, lam=lam, **ids)
        return r.low, r.high
    return interval


def _ipw(y, p, pi):  # type: ignore[no-untyped-def]
    r = ipw_mean(y, p, pi)
    return r.low, r.high


def main() -> None:
    seeds = range(3)
    print(f"coverage at nominal 0.95, {SIMS} simulations per seed, seeds {list(seeds)}")
    for n in (30, 50, 80):
        for lam in (None, 1.0):
            rows = [coverage(few_labels([n]), _ppi(lam), SIMS, s) for s in seeds]
            classical = np.mean([coverage(few_labels([n]), _ppi(0.0), SIMS, s).width for s in seeds])
            print(f"PPI++ lam={'tuned' if lam is None else lam} n={n}: coverage "
                  f"{[round(r.rate, 3) for r in rows]}, width {np.mean([r.width for r in rows]):.3f} "
                  f"(labelled-only {classical:.3f})")
    for k in (12, 24):
        print(f"clusters, {k} labelled conversations: clustered "
              f"{[coverage(conversations(k), _ppi(None, True), SIMS, s).rate for s in seeds]}, row-wise "
              f"{[coverage(conversations(k), _ppi(None), SIMS, s).rate for s in seeds]}")
    for budget in (30, 60):
        rows = [coverage(drawn_labels(budget), _ipw, SIMS, s) for s in seeds]
        print(f"active IPW, budget {budget}: coverage {[round(r.rate, 3) for r in rows]}, "
              f"width {np.mean([r.width for r in rows]):.3f}")


if __name__ == "__main__":
    main()
