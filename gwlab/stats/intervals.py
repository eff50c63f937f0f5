"""Confidence intervals and paired tests for evaluation metrics, in plain numpy (no scipy).

Proportions (accuracy, and a reliability bin's observed rate) get a Wilson score interval; the exact
Clopper-Pearson interval is available too. Every other metric (macro-F1, kappa, Brier, log-loss, ECE,
MAE) gets a percentile bootstrap over rows: `RESAMPLES` resamples of the rows with replacement, seeded
(`SEED`). Each metric is a function of sums (`RowSums`), and the point estimate is the same function
at weight one. Brier, log-loss, ECE and MAE are sums of per-row columns: the resamples are drawn
`chunk` at a time as counts per row (an index draw per chunk, one `bincount` per resample, never a
resamples x rows index matrix), and one chunk serves every column of every question of a frame.
Accuracy, macro-F1 and kappa depend on the rows only through the confusion counts: resampling the rows
is drawing those counts from a multinomial, which is exact and costs nothing per row (paired sides
draw their joint cells). The interval is the (1 - level)/2 and (1 + level)/2 quantiles of the
resampled values (the percentile method, not BCa).

Below `MIN_ROWS` rows an interval says little: it is still computed, flagged (`small`) and warned of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gwlab.errors import InvalidRequest
from gwlab.stats.metrics import EPS

RESAMPLES = 1000  # bootstrap resamples; the percentile endpoints move by ~0.1-0.3 points between seeds
SEED = 0
MIN_ROWS = 10  # below this many rows an interval is shown, flagged `small` and warned of
_CELLS_PER_CHUNK = 10_000_000  # resamples x rows per chunk (100 x 100,000: 40 MB of float32 counts)

__all__ = ["MIN_ROWS", "RESAMPLES", "SEED", "RowSums", "binom_cdf", "bootstrap_counts", "bootstrap_sums", "check_level",
           "clopper_pearson", "holm", "mcnemar_exact", "normal_quantile", "percentile", "row_sums", "wilson"]


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


def normal_quantile(p: float) -> float:
    """The standard normal quantile at `p` (for one-sided normal bounds, e.g. a cascade's recall target)."""
    return _normal_quantile(p)


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
    probabilities: np.ndarray = np.minimum(1.0, np.exp(top[:, 0]) * np.exp(terms - top).sum(axis=1))
    return probabilities


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval: the p at which observing k or fewer / k or more has (1-level)/2."""
    alpha = 1 - check_level(level)
    if n <= 0:
        return float("nan"), float("nan")
    low = 0.0 if k == 0 else _bisect(lambda p: 1 - binom_cdf(k - 1, n, p) - alpha / 2)  # P(X >= k) rises
    high = 1.0 if k == n else _bisect(lambda p: alpha / 2 - binom_cdf(k, n, p))  # P(X <= k) falls
    return low, high


def _bisect(rising: Callable[[float], NDArray[np.float64]], steps: int = 60) -> float:
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
    """One question's rows in the two forms every metric is computed from (`metrics`).

    `cells`: each row's confusion cell, `y * (k + 1) + pred` (`pred = k`: a prediction outside the
    classes). Accuracy, macro-F1 and kappa depend on the rows only through the confusion counts, so
    resampling rows is drawing those counts from a multinomial: exact, and free of the row count.
    `columns`: rows x width, summed with bootstrap weights: [row] then, with probabilities, [brier,
    nll, hit - value in each of the B bins] (ECE = sum over bins of |sum| / rows), then [abs error].
    """

    cells: np.ndarray
    columns: np.ndarray
    k: int
    bins: int  # 0 without probabilities
    mae: bool

    @property
    def n_cells(self) -> int:
        return self.k * (self.k + 1)

    def counts(self) -> np.ndarray:
        return np.bincount(self.cells, minlength=self.n_cells).astype(float)

    def point(self) -> dict[str, float]:
        """Every metric on the rows as they are (weight one each)."""
        values = self.metrics(self.counts()[None], self.columns.sum(axis=0)[None])
        return {name: float(v[0]) for name, v in values.items()}

    def metrics(self, counts: np.ndarray, sums: np.ndarray) -> dict[str, np.ndarray]:
        """Every metric per resample from confusion counts (r x cells) and column sums (r x width)."""
        k = self.k
        cm = counts.reshape(len(counts), k, k + 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = cm.sum(axis=(1, 2))
            tp = cm[:, np.arange(k), np.arange(k)]
            y, pred = cm.sum(axis=2), cm[:, :, :k].sum(axis=1)
            p_o = tp.sum(axis=1) / n
            denom = y + pred  # 2tp + fp + fn
            f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), np.nan)
            used = (denom > 0).sum(axis=1)
            macro = np.where(used > 0, np.nansum(f1, axis=1) / np.maximum(used, 1), np.nan)
            p_e = (y * pred).sum(axis=1) / (n * n)
            kappa = np.where(p_e >= 1.0 - 1e-12, np.where(p_o >= 1.0, 1.0, np.nan), (p_o - p_e) / (1.0 - p_e))
            out = {"accuracy": p_o, "macro_f1": macro, "kappa": kappa}
            rows, at = sums[:, 0], 1
            if self.bins:
                gap = sums[:, at + 2:at + 2 + self.bins]
                out |= {"brier": sums[:, at] / rows, "log_loss": sums[:, at + 1] / rows,
                        "ece": np.abs(gap).sum(axis=1) / rows}
                at += 2 + self.bins
            if self.mae:
                out["mae"] = sums[:, at] / rows
        return out


def row_sums(y: np.ndarray, pred: np.ndarray, k: int, proba: np.ndarray | None, kind: str, bins: int,
             abs_error: np.ndarray | None) -> RowSums:
    """`RowSums` of one question (definitions as in `stats/metrics.py`)."""
    n = len(y)
    cells = y * (k + 1) + np.where(pred >= 0, pred, k)
    parts = [np.ones((n, 1))]
    used_bins = 0
    if proba is not None:
        used_bins = bins
        if kind == "noul":
            brier = (proba[:, 1] - (y == 1)) ** 2
            value, hit = proba[:, 1], (y == 1).astype(float)
        else:
            brier = np.sum((proba - np.eye(k)[y]) ** 2, axis=1)
            value, hit = proba.max(axis=1), (proba.argmax(axis=1) == y).astype(float)
        nll = -np.log(np.clip(proba[np.arange(n), y], EPS, 1 - EPS))
        edges = np.linspace(0.0, 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, value, side="right") - 1, 0, bins - 1)
        parts += [brier[:, None], nll[:, None], np.eye(bins)[which] * (hit - value)[:, None]]
    if abs_error is not None:
        parts.append(abs_error[:, None])
    return RowSums(cells.astype(np.intp), np.hstack(parts), k, used_bins, abs_error is not None)


def resample_counts(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> Iterator[np.ndarray]:
    """Chunks (c x n) of bootstrap counts: how often each row is drawn in each resample of n rows."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(100, _CELLS_PER_CHUNK // max(n, 1)))
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        draws = rng.integers(0, n, size=(c, n), dtype=np.int32)
        counts = np.empty((c, n), dtype=np.float32)
        for i, row in enumerate(draws):  # a loop over resamples of the chunk, never over rows
            counts[i] = np.bincount(row, minlength=n)
        yield counts
        done += c


def bootstrap_sums(columns: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED,
                   clusters: np.ndarray | None = None) -> np.ndarray:
    """Weighted column sums (resamples x width) of `columns` (rows x width) over bootstrap resamples.

    In float32 (counts are exact in it; a sum's rounding, ~1e-6 of it, is far below the resampling
    noise an interval carries), 100 resamples by at most 32 columns per product: BLAS's fast shapes.
    `clusters` (each row's cluster, 0..c-1) makes it a cluster bootstrap: the c clusters are drawn and
    every row weighs what its cluster drew, so rows that are not independent (the repeats of one
    question) move together and the interval is not narrowed by counting them as new evidence.
    """
    _check_resamples(resamples)
    blocks = [np.ascontiguousarray(columns[:, i:i + 32], dtype=np.float32) for i in range(0, columns.shape[1], 32)]
    n = len(columns) if clusters is None else int(clusters.max(initial=-1)) + 1
    draws = resample_counts(n, resamples, seed)
    weights = draws if clusters is None else (w[:, clusters] for w in draws)
    sums = [np.hstack([w @ block for block in blocks]) for w in weights]
    return np.vstack(sums).astype(float)


def bootstrap_counts(sides: Sequence[RowSums], resamples: int = RESAMPLES, seed: int = SEED) -> list[np.ndarray]:
    """Confusion counts (resamples x cells) per side for bootstrap resamples of the rows the sides share.

    One multinomial draw over the sides' joint cells, so two answers to the same rows stay paired.
    """
    _check_resamples(resamples)
    shape = [side.n_cells for side in sides]
    joint = np.ravel_multi_index([side.cells for side in sides], shape)
    n = len(joint)
    observed = np.bincount(joint, minlength=int(np.prod(shape)))
    rng = np.random.default_rng([seed, 1])  # a stream apart from the row weights'
    drawn = rng.multinomial(n, observed / max(n, 1), size=resamples).reshape(resamples, *shape).astype(float)
    axes = range(1, len(shape) + 1)
    return [drawn.sum(axis=tuple(a for a in axes if a != i)) for i in axes]


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise InvalidRequest("resamples", f"must be a positive number of bootstrap resamples; got {resamples!r}")


def percentile(values: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval of resampled values (NaN resamples, e.g. no row of a slice drawn, left out)."""
    alpha = 1 - check_level(level)
    finite = values[~np.isnan(values)]
    if not len(finite):
        return float("nan"), float("nan")
    low, high = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
