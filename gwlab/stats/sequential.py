"""Anytime-valid confidence sequences for a paired difference, so a comparison may stop at any look.

A fixed-n interval checked after every batch of rows, stopping at the first that excludes 0, rejects a
true null far more often than alpha (the tests show it). A confidence sequence covers the mean at every
time at once: P(exists t: mu not in C_t) <= alpha, so stopping when it first excludes 0 keeps the type-I
error at alpha however often it is looked at.

This is the predictable-plug-in empirical-Bernstein sequence of Waudby-Smith & Ramdas 2023 (JRSS-B,
"Estimating means of bounded random variables by betting", Theorem 2) for X in [0, 1]; a paired
difference d in [-1, 1] (B right minus A right, or two scores' difference rescaled) is mapped to
X = (d + 1) / 2 and back. `horizon` tunes the bets for a planned number of rows (their section 3.3:
any predictable bet keeps validity; tuning only moves where the sequence is tightest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Sequence", "confidence_sequence"]

_MAX_BET = 0.5


@dataclass(frozen=True)
class Sequence:
    """The sequence's bounds for the mean difference after each row (arrays of one entry per row)."""

    low: np.ndarray
    high: np.ndarray

    def first_exclusion(self, margin: float = 0.0) -> int | None:
        """Rows seen when the sequence first excluded [-margin, margin] (None: it never did)."""
        out = np.flatnonzero((self.low > margin) | (self.high < -margin))
        return int(out[0]) + 1 if len(out) else None


def confidence_sequence(differences: np.ndarray, *, alpha: float = 0.05, horizon: int | None = None) -> Sequence:
    """Bounds on the mean of paired differences in [-1, 1], valid simultaneously after every row.

    Works along the last axis, so a (simulations, rows) array gives one sequence per simulation."""
    d = np.asarray(differences, dtype=np.float64)
    if np.any(np.abs(d) > 1.0 + 1e-12):
        raise ValueError("paired differences must lie in [-1, 1]")
    x = (d + 1.0) / 2.0
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1.0)  # mu_hat_t
    mu_prev = np.concatenate([np.full((*x.shape[:-1], 1), 0.5), mu[..., :-1]], axis=-1)
    var = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1.0)  # sigma_hat^2_t
    var_prev = np.concatenate([np.full((*x.shape[:-1], 1), 0.25), var[..., :-1]], axis=-1)
    log_term = math.log(2.0 / alpha)
    scale = float(horizon) if horizon else t * np.log1p(t)
    bet = np.minimum(np.sqrt(2.0 * log_term / (var_prev * scale)), _MAX_BET)
    psi = (-np.log1p(-bet) - bet) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    total = np.cumsum(bet, axis=-1)
    centre = np.cumsum(bet * x, axis=-1) / total
    half = (log_term + np.cumsum(v * psi, axis=-1)) / total
    low = np.maximum.accumulate(np.maximum(centre - half, 0.0), axis=-1)  # an intersection stays valid
    high = np.minimum.accumulate(np.minimum(centre + half, 1.0), axis=-1)
    return Sequence(2.0 * low - 1.0, 2.0 * high - 1.0)
