"""Coverage simulations that the statistics tests check and the benchmarks print: one loop, one model per
regime, so a figure in docs/ and the test that holds it simulate the same thing.

A regime is a `Draw`: given the generator and the simulation's number, the true value and the arguments
of the interval under test. `coverage` counts how often the interval holds the truth, and its mean width.
bench/ppi_coverage.py and bench/ece_coverage.py print these; tests/stats/test_ppi.py and
tests/stats/test_calibration_error.py assert them (tests reach bench/harness, bench imports no test).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gwlab.stats import calibration_error as ce
from gwlab.stats.active import labelling_probabilities
from gwlab.stats.ppi import hajek_mean, ipw_mean, ppi_mean

Draw = Callable[[np.random.Generator, int], tuple[float, tuple[Any, ...]]]
Interval = Callable[..., tuple[float, float]]
SHARE = 0.3  # the true share of the PPI regimes
UNLABELLED = 2000  # model answers beside the labels


@dataclass(frozen=True)
class Coverage:
    rate: float
    width: float  # mean width of the intervals


def coverage(draw: Draw, interval: Interval, sims: int, seed: int) -> Coverage:
    """Share of `sims` intervals holding their draw's truth, and their mean width."""
    rng = np.random.default_rng(seed)
    hits, widths = 0, []
    for i in range(sims):
        truth, args = draw(rng, i)
        low, high = interval(*args)
        hits += low <= truth <= high
        widths.append(high - low)
    return Coverage(hits / sims, float(np.mean(widths)))


def _biased(rng: np.random.Generator, size: int, share: float = SHARE) -> tuple[np.ndarray, np.ndarray]:
    """A model that overstates the share: P(true) 0.75 on true rows, 0.3 on the others, noise 0.15."""
    truth = rng.random(size) < share
    return truth, np.clip(np.where(truth, 0.75, 0.3) + rng.normal(0, 0.15, size), 0, 1)


def few_labels(sizes: Sequence[int]) -> Draw:
    """PPI's hard regime: the biased model on UNLABELLED rows, `sizes[i % len(sizes)]` labelled rows;
    the interval gets (labels, the model on them, the model on the rest)."""
    def draw(rng: np.random.Generator, i: int) -> tuple[float, tuple[Any, ...]]:
        n = sizes[i % len(sizes)]
        truth, p = _biased(rng, n + UNLABELLED)
        return SHARE, (truth[:n].astype(float), p[:n], p[n:])
    return draw


def conversations(labelled: int) -> Draw:
    """300 conversations of 5 rows sharing a tendency; `labelled` whole conversations labelled. The
    interval gets (labels, model on them, model on the rest, their conversations, the rest's)."""
    def draw(rng: np.random.Generator, i: int) -> tuple[float, tuple[Any, ...]]:
        clusters = np.repeat(np.arange(300), 5)
        base = rng.random(300) < SHARE
        truth = np.where(rng.random(1500) < 0.8, base[clusters], rng.random(1500) < SHARE)
        p = np.clip(np.where(truth, 0.7, 0.35) + rng.normal(0, 0.1, 1500), 0, 1)
        lab = np.isin(clusters, rng.choice(300, labelled, replace=False))
        return float(truth.mean()), (truth[lab].astype(float), p[lab], p[~lab], clusters[lab], clusters[~lab])
    return draw


def drawn_labels(budget: int, share: float = SHARE) -> Draw:
    """Active labelling: the biased model on UNLABELLED rows, labels drawn by `labelling_probabilities`
    (about `budget`, uncertain rows favoured). The interval gets (labels or NaN, model, probabilities)."""
    def draw(rng: np.random.Generator, i: int) -> tuple[float, tuple[Any, ...]]:
        truth, p = _biased(rng, UNLABELLED, share)
        pi = labelling_probabilities(p, budget)
        return float(truth.mean()), (np.where(rng.random(UNLABELLED) < pi, truth, np.nan), p, pi)
    return draw


def ppi_interval(lam: float | None, clustered: bool = True) -> Interval:
    """`ppi_mean`'s interval for the draws above (`clustered`: given the conversations when a draw has them)."""
    def interval(y: np.ndarray, h: np.ndarray, u: np.ndarray, clusters: np.ndarray | None = None,
                 clusters_unlabelled: np.ndarray | None = None) -> tuple[float, float]:
        ids = {"clusters": clusters, "clusters_unlabelled": clusters_unlabelled} if clustered else {}
        r = ppi_mean(y, h, u, lam=lam, **ids)
        return r.low, r.high
    return interval


def ipw_interval(y: np.ndarray, p: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
    r = ipw_mean(y, p, pi)
    return r.low, r.high


def labels_only_interval(y: np.ndarray, p: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
    """The labelled-only figure of an active estimate: the weighted mean of the labels (`hajek_mean`)."""
    r = hajek_mean(y, pi)
    return r.low, r.high


def horvitz_thompson_interval(y: np.ndarray, p: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
    """The labelled-only form gwlab showed before: ipw_mean at lam = 0, sum(Y / pi) / N."""
    r = ipw_mean(y, p, pi, lam=0.0)
    return r.low, r.high


def calibration(n: int, shrink: float) -> Draw:
    """Predictions uniform on [0, 1], labels true with probability 0.5 + shrink (p - 0.5). With ten
    equal-width bins each bin's gap is -(1 - shrink)(midpoint - 0.5), so the population ECE is
    (1 - shrink) * 0.25 exactly. The interval gets (predictions, labels, the simulation's number)."""
    def draw(rng: np.random.Generator, i: int) -> tuple[float, tuple[Any, ...]]:
        p = rng.random(n)
        return (1 - shrink) * 0.25, (p, (rng.random(n) < 0.5 + shrink * (p - 0.5)).astype(float), i)
    return draw


# --- the ECE intervals gwlab shipped before the one in gwlab/stats/calibration_error.py (the mutants) ---


def percentile_bootstrap_ece(p: np.ndarray, y: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The first: a percentile bootstrap of the plug-in ECE (400 resamples, ten bins)."""
    rng = np.random.default_rng(seed)
    n, resamples = len(p), 400
    which = np.clip(np.searchsorted(np.linspace(0, 1, 11), p, side="right") - 1, 0, 9)
    drawn = rng.integers(0, n, size=(resamples, n))
    cell = (np.arange(resamples)[:, None] * 10 + which[drawn]).ravel()
    gap = np.bincount(cell, (y - p)[drawn].ravel(), resamples * 10).reshape(resamples, 10)
    values = np.abs(gap).sum(axis=1) / n  # sum_b (n_b / n) |mean gap_b|
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def union_bound_ece(p: np.ndarray, y: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The next: plug-in -/+ the `level` quantile of sum_b w_b |N(0, s_b^2)| at both ends (valid everywhere,
    tight only at ECE 0)."""
    b = ce.binned(p, y)
    noise = np.abs(np.random.default_rng(seed).standard_normal((4000, len(b.weight))) * np.sqrt(b.variance))
    q = float(np.quantile(noise @ b.weight, level))
    return max(ce.plugin(b) - q, 0.0), ce.plugin(b) + q
