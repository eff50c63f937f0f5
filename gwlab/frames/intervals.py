"""Confidence intervals and paired tests for evaluation metrics, in plain numpy (no scipy).

Proportions (accuracy, and a reliability bin's observed rate) get a Wilson score interval; the exact
Clopper-Pearson interval is available too. Every other metric (macro-F1, kappa, Brier, log-loss, ECE,
MAE) gets a percentile bootstrap over rows: `RESAMPLES` resamples of the rows with replacement, seeded
(`SEED`), drawn `chunk` resamples at a time as multinomial counts per row (an index draw per chunk,
folded by one `bincount`), never a resamples x rows index matrix. Each metric is a function of weighted
column sums (`RowSums`), so one count matrix serves every metric and every question of a frame, and
the point estimate is the same function at weight one. The interval is the (1 - level)/2 and
(1 + level)/2 quantiles of the resampled values (the percentile method, not BCa).

Below `MIN_ROWS` rows an interval says little: it is still computed, flagged (`small`) and warned of.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gwlab.errors import InvalidRequest
from gwlab.frames.metrics import EPS

RESAMPLES = 1000  # bootstrap resamples; the percentile endpoints move by ~0.1-0.3 points between seeds
SEED = 0
MIN_ROWS = 10  # below this many rows an interval is shown, flagged `small` and warned of
_CELLS_PER_CHUNK = 2_000_000  # resamples x rows per drawn chunk: 16 MB of float64 counts

__all__ = ["MIN_ROWS", "RESAMPLES", "SEED", "RowSums", "binom_cdf", "bootstrap_sums", "check_level",
           "clopper_pearson", "holm", "mcnemar_exact", "percentile", "row_sums", "wilson"]


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1, else an error naming `level`."""
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise InvalidRequest("level", f"must be a number strictly between 0 and 1 (e.g. 0.95); got {level!r}")
    return float(level)


def _normal_quantile(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425 or p > 1 - 0.02425:
        q = np.sqrt(-2 * np.log(min(p, 1 - p)))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        return float(x if p < 0.5 else -x)
    q = p - 0.5
    r = q * q
    return float((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
                 (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1))


def wilson(k: np.ndarray | float, n: np.ndarray | float, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials: stays inside [0, 1] and is sensible at 0 and n."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    z = _normal_quantile(0.5 + check_level(level) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def binom_cdf(k: int, n: int, p: float | np.ndarray) -> np.ndarray:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (exact enough for n up to millions)."""
    p = np.atleast_1d(np.asarray(p, dtype=float))
    if k < 0:
        return np.zeros_like(p)
    if k >= n:
        return np.ones_like(p)
    logfact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    i = np.arange(k + 1)
    log_choose = logfact[n] - logfact[i] - logfact[n - i]
    with np.errstate(divide="ignore"):
        logp, log1p = np.log(p)[:, None], np.log1p(-p)[:, None]
    terms = log_choose + np.where(i > 0, i * logp, 0.0) + np.where(n - i > 0, (n - i) * log1p, 0.0)
    top = terms.max(axis=1, keepdims=True)
    return np.minimum(1.0, np.exp(top[:, 0]) * np.exp(terms - top).sum(axis=1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval: the p at which observing k or fewer / k or more has (1-level)/2."""
    alpha = 1 - check_level(level)
    if n <= 0:
        return float("nan"), float("nan")
    low = 0.0 if k == 0 else _bisect(lambda p: 1 - binom_cdf(k - 1, n, p) - alpha / 2)  # P(X >= k) rises
    high = 1.0 if k == n else _bisect(lambda p: alpha / 2 - binom_cdf(k, n, p))  # P(X <= k) falls
    return low, high


def _bisect(rising, steps: int = 60) -> float:  # type: ignore[no-untyped-def]
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if rising(mid)[0] < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact McNemar p-value: two-sided binomial test of the discordant pairs against 1/2 (1.0 if none)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * binom_cdf(min(a_only, b_only), n, 0.5)[0]))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment; NaN p-values are left out and stay NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class RowSums:
    """One question's rows as columns whose weighted sums give every metric (`metrics`).

    Layout: [row, correct, y one-hot (k), pred one-hot (k), true positive (k)], then with
    probabilities [brier, nll, bin value (B), bin hit (B)] (ECE = sum over bins |hit - value| / rows),
    then [abs error] for MAE.
    """

    columns: np.ndarray  # rows x width
    k: int
    bins: int  # 0 without probabilities
    mae: bool

    def metrics(self, sums: np.ndarray) -> dict[str, np.ndarray]:
        """Every metric for each row of `sums` (resamples x width); NaN where a resample has no row."""
        k, s = self.k, np.atleast_2d(sums)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = s[:, 0]
            y, pred, tp = s[:, 2:2 + k], s[:, 2 + k:2 + 2 * k], s[:, 2 + 2 * k:2 + 3 * k]
            p_o = s[:, 1] / n
            denom = y + pred  # 2tp + fp + fn
            f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), np.nan)
            used = (denom > 0).sum(axis=1)
            macro = np.where(used > 0, np.nansum(f1, axis=1) / np.maximum(used, 1), np.nan)
            p_e = (y * pred).sum(axis=1) / (n * n)
            kappa = np.where(p_e >= 1.0 - 1e-12, np.where(p_o >= 1.0, 1.0, np.nan), (p_o - p_e) / (1.0 - p_e))
            out = {"accuracy": p_o, "macro_f1": macro, "kappa": kappa}
            at = 2 + 3 * k
            if self.bins:
                b = self.bins
                value, hit = s[:, at + 2:at + 2 + b], s[:, at + 2 + b:at + 2 + 2 * b]
                out |= {"brier": s[:, at] / n, "log_loss": s[:, at + 1] / n,
                        "ece": np.abs(hit - value).sum(axis=1) / n}
                at += 2 + 2 * b
            if self.mae:
                out["mae"] = s[:, at] / n
        return out


def row_sums(y: np.ndarray, pred: np.ndarray, k: int, proba: np.ndarray | None, kind: str, bins: int,
             abs_error: np.ndarray | None) -> RowSums:
    """The per-row columns of `RowSums` for one question (definitions as in `frames/metrics.py`)."""
    n = len(y)
    eye = np.eye(k)
    y_hot = eye[y]
    pred_hot = np.where((pred >= 0)[:, None], eye[np.clip(pred, 0, None)], 0.0)
    parts = [np.ones((n, 1)), (y == pred)[:, None].astype(float), y_hot, pred_hot, y_hot * pred_hot]
    used_bins = 0
    if proba is not None:
        used_bins = bins
        if kind == "noul":
            brier = (proba[:, 1] - (y == 1)) ** 2
            value, hit = proba[:, 1], (y == 1).astype(float)
        else:
            brier = np.sum((proba - y_hot) ** 2, axis=1)
            value, hit = proba.max(axis=1), (proba.argmax(axis=1) == y).astype(float)
        nll = -np.log(np.clip(proba[np.arange(n), y], EPS, 1 - EPS))
        edges = np.linspace(0.0, 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, value, side="right") - 1, 0, bins - 1)
        bin_hot = np.eye(bins)[which]
        parts += [brier[:, None], nll[:, None], bin_hot * value[:, None], bin_hot * hit[:, None]]
    if abs_error is not None:
        parts.append(abs_error[:, None])
    return RowSums(np.hstack(parts), k, used_bins, abs_error is not None)


def resample_counts(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> Iterator[np.ndarray]:
    """Chunks (c x n) of bootstrap counts: how often each row is drawn in each resample of n rows."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(100, _CELLS_PER_CHUNK // max(n, 1)))
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        draws = rng.integers(0, n, size=(c, n)) + (np.arange(c) * n)[:, None]
        yield np.bincount(draws.ravel(), minlength=c * n).reshape(c, n).astype(float)
        done += c


def bootstrap_sums(columns: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Weighted column sums (resamples x width) of `columns` (rows x width) over bootstrap resamples."""
    if resamples < 1:
        raise InvalidRequest("resamples", f"must be a positive number of bootstrap resamples; got {resamples}")
    return np.vstack([w @ columns for w in resample_counts(len(columns), resamples, seed)])


def percentile(values: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval of resampled values (NaN resamples, e.g. no row of a slice drawn, left out)."""
    alpha = 1 - check_level(level)
    finite = values[~np.isnan(values)]
    if not len(finite):
        return float("nan"), float("nan")
    low, high = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
