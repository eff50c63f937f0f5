"""Coverage of the prediction-powered intervals (gwlab/stats/ppi.py) in their hard regimes, beside the
labelled-only width and the broken alternatives, as a distribution over seeds.

    python bench/ppi_coverage.py            # ~1 min on one core; figures quoted in docs/guide/labels.md

A model that overstates the share (truth 0.3; P(true) 0.75 on refunds, 0.3 otherwise, noise 0.15),
2,000 model answers, 30 / 50 / 80 labels; conversations of 5 rows sharing a tendency for the clustered
rows; IPW labels drawn towards uncertain rows by `labelling_probabilities`.
"""

from __future__ import annotations

import numpy as np

from gwlab.stats.active import labelling_probabilities
from gwlab.stats.ppi import ipw_mean, ppi_mean

SIMS = 500


def _data(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    truth = rng.random(size) < 0.3
    return truth, np.clip(np.where(truth, 0.75, 0.3) + rng.normal(0, 0.15, size), 0, 1)


def uniform(seed: int, n: int, lam: float | None) -> tuple[float, float, float]:
    """(coverage, mean width, mean labelled-only width) over SIMS draws."""
    rng = np.random.default_rng(seed)
    hits, widths, classical = 0, [], []
    for _ in range(SIMS):
        truth, p = _data(rng, n + 2000)
        r = ppi_mean(truth[:n].astype(float), p[:n], p[n:], lam=lam)
        hits += r.low <= 0.3 <= r.high
        widths.append(r.width)
        classical.append(ppi_mean(truth[:n].astype(float), p[:n], p[n:], lam=0.0).width)
    return hits / SIMS, float(np.mean(widths)), float(np.mean(classical))


def clustered(seed: int, labelled_clusters: int, use_clusters: bool) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(SIMS):
        clusters = np.repeat(np.arange(300), 5)
        base = rng.random(300) < 0.3
        truth = np.where(rng.random(1500) < 0.8, base[clusters], rng.random(1500) < 0.3)
        p = np.clip(np.where(truth, 0.7, 0.35) + rng.normal(0, 0.1, 1500), 0, 1)
        lab = np.isin(clusters, rng.choice(300, labelled_clusters, replace=False))
        ids = {"clusters": clusters[lab], "clusters_unlabelled": clusters[~lab]} if use_clusters else {}
        r = ppi_mean(truth[lab].astype(float), p[lab], p[~lab], **ids)
        hits += r.low <= truth.mean() <= r.high
    return hits / SIMS


def active(seed: int, budget: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    hits, widths = 0, []
    for _ in range(SIMS):
        truth, p = _data(rng, 2000)
        pi = labelling_probabilities(p, budget)
        drawn = rng.random(2000) < pi
        r = ipw_mean(np.where(drawn, truth, np.nan), p, pi)
        hits += r.low <= truth.mean() <= r.high
        widths.append(r.width)
    return hits / SIMS, float(np.mean(widths))


def main() -> None:
    seeds = range(3)
    print(f"coverage at nominal 0.95, {SIMS} simulations per seed, seeds {list(seeds)}")
    for n in (30, 50, 80):
        for lam in (None, 1.0):
            rows = [uniform(s, n, lam) for s in seeds]
            print(f"PPI++ lam={'tuned' if lam is None else lam} n={n}: coverage "
                  f"{[round(r[0], 3) for r in rows]}, width {np.mean([r[1] for r in rows]):.3f} "
                  f"(labelled-only {np.mean([r[2] for r in rows]):.3f})")
    for k in (12, 24):
        print(f"clusters, {k} labelled conversations: clustered {[clustered(s, k, True) for s in seeds]}, "
              f"row-wise {[clustered(s, k, False) for s in seeds]}")
    for budget in (30, 60):
        rows = [active(s, budget) for s in seeds]
        print(f"active IPW, budget {budget}: coverage {[round(r[0], 3) for r in rows]}, "
              f"width {np.mean([r[1] for r in rows]):.3f}")


if __name__ == "__main__":
    main()
