"""Binned expected calibration error (ECE): the plug-in, a debiased estimate and an interval that covers.

The plug-in ECE, sum over bins of (n_b / n) |mean(hit - value)|, is biased upward: a bin's observed gap is
its true gap plus noise, and |.| turns the noise into a positive offset (a perfectly calibrated model
scores about 0.06 on 300 rows with 10 bins). A percentile bootstrap of it never covers a calibrated
model's 0, and misses small miscalibrations too (issue 31; NOTES.md).

- `debiased` is Kumar, Liang & Ma 2019 ("Verified Uncertainty Calibration", the `normal_debiased_ce` of
  their package `uncertainty-calibration`): 2 * plug-in - E|N(gap_b, s_b^2)| summed, with the expectation
  in closed form instead of their Monte Carlo draws. It removes part of the bias, not all, and can
  be negative.
- `interval` bounds each end by what the noise e_b = observed gap - true gap can do to |.|, per bin:
  * upper end: |g| - |g + e| <= -sign(g) e for every g, so ECE <= plug-in + z sqrt(sum_b w_b^2 s_b^2)
    whatever the gaps (a normal quantile: the signed noise sums to a normal);
  * lower end: |g + e| - |g| <= |e| (an equality at g = 0), so ECE >= plug-in - q, q a quantile of
    sum_b w_b D_b, with D_b = |N(0, s_b^2)| for a bin whose gap's sign is uncertain
    (|gap_b| <= SURE s_b) and the signed N(0, s_b^2) for a bin whose sign is clear (SURE standard errors).
  Each end may miss (1 - `level`) / 2, but the lower end may miss the whole 1 - `level` when no bin's
  sign is clear: its bound is then tight only at ECE 0, where the upper end cannot miss (plug-in >= 0).
  The lower end is clipped at 0. s_b^2 is the larger of the two readings of a bin's variance, the
  labels' ybar (1 - ybar) and the calibrated model's mean p (1 - p), over n_b, so a bin whose few labels
  all agree still carries the noise its predictions imply.

Simulated coverage (tests/stats/test_calibration_error.py; bench/ece_coverage.py prints it): about nominal
for a calibrated model (ECE 0) and a clearly miscalibrated one, at 300 and 1,000 rows; above nominal
(0.99-1.0, conservative) where every bin's true gap is within about a standard error of 0: |g| has no
derivative at 0, and no interval keeps its level there without being too wide elsewhere. The
population ECE here is that of the same bins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

DRAWS = 20_000  # Monte Carlo draws of the noise sum: the 95 % quantile moves by < 1 % of itself between seeds
SEED = 0
SURE = 2.5  # standard errors from 0 at which a bin's gap has a clear sign (about 1 % of calibrated bins pass)


@dataclass(frozen=True)
class Bins:
    """Per non-empty bin: weight n_b / n, mean gap (hit - value), and the variance of that mean."""

    weight: np.ndarray
    gap: np.ndarray
    variance: np.ndarray  # the larger reading, for the interval
    label_variance: np.ndarray  # ybar (1 - ybar) / n_b: Kumar et al.'s, for the debiased estimate


def binned(value: np.ndarray, hit: np.ndarray, bins: int = 10) -> Bins:
    """Equal-width bins over [0, 1] (the last one closed), as `frames/metrics.reliability` draws them."""
    value, hit = np.asarray(value, float), np.asarray(hit, float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, value, side="right") - 1, 0, bins - 1)
    count = np.bincount(which, minlength=bins).astype(float)
    used = count > 0
    n_b = count[used]
    gap = np.bincount(which, hit - value, bins)[used] / n_b
    ybar = np.bincount(which, hit, bins)[used] / n_b
    p_var = np.bincount(which, value * (1.0 - value), bins)[used] / n_b
    label_variance = ybar * (1.0 - ybar) / n_b
    return Bins(n_b / max(len(value), 1), gap, np.maximum(label_variance, p_var / n_b), label_variance)


def plugin(b: Bins) -> float:
    """The plug-in ECE: sum of w_b |gap_b| (NaN without rows)."""
    return float(np.sum(b.weight * np.abs(b.gap))) if len(b.weight) else float("nan")


def debiased(b: Bins) -> float:
    """Kumar et al.'s debiased ECE: 2 * plug-in - sum_b w_b E|N(gap_b, ybar_b (1 - ybar_b) / n_b)|."""
    if not len(b.weight):
        return float("nan")
    return 2.0 * plugin(b) - float(np.sum(b.weight * _folded_mean(b.gap, np.sqrt(b.label_variance))))


def interval(b: Bins, level: float = 0.95, *, draws: int = DRAWS, seed: int = SEED) -> tuple[float, float]:
    """[plug-in - q, plug-in + z sd] (see the module's docstring), the low end clipped at 0."""
    if not len(b.weight):
        return float("nan"), float("nan")
    sd = np.sqrt(b.variance)
    sure = np.abs(b.gap) > SURE * sd
    alpha = 1.0 - level
    low_miss, high_miss = (alpha / 2 if sure.any() else alpha), alpha / 2
    noise = np.random.default_rng(seed).standard_normal((draws, len(b.weight))) * sd
    q = float(np.quantile(np.where(sure, np.sign(b.gap) * noise, np.abs(noise)) @ b.weight, 1.0 - low_miss))
    centre = plugin(b)
    spread = math.sqrt(float(np.sum(b.weight**2 * b.variance)))
    return max(centre - q, 0.0), centre + NormalDist().inv_cdf(1.0 - high_miss) * spread


def _folded_mean(mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """E|X| for X ~ N(mean, sd^2), elementwise; |mean| where sd is 0."""
    erf = np.vectorize(math.erf, otypes=[float])
    safe = np.where(sd > 0, sd, 1.0)
    folded = safe * np.sqrt(2.0 / np.pi) * np.exp(-(mean**2) / (2 * safe**2)) + mean * erf(mean / (np.sqrt(2.0) * safe))
    means: np.ndarray = np.where(sd > 0, folded, np.abs(mean))
    return means
