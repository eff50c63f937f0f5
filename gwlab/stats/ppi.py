"""Prediction-powered means: every row's model answer plus the labelled rows' correction, PPI++ style.

With n labelled rows (label Y, model answer Yhat) and N unlabelled rows (Yhat only), PPI++
(Angelopoulos, Duchi & Zrnic 2024) estimates the population mean of Y as

    theta = lam * mean(Yhat over unlabelled) + mean(Y - lam * Yhat over labelled)

which is unbiased for every lam, whatever the model's errors: the labelled rows measure and remove the
model's bias. lam = 0 is the classical labelled-only mean, lam = 1 plain PPI; the tuned lam minimises
the variance (`ppi_py`'s `_calc_lam_glm`: cov(Y, Yhat) / ((1 + n/N) var(Yhat)), clipped to [0, 1]).
The interval is the normal one, se^2 = lam^2 var(Yhat_u)/N + var(Y - lam Yhat)/n, as `ppi_py.ppi_mean_ci`
computes it (population variances), so the two agree to rounding on the same data.

Clusters (rows that share a conversation, a user, a document): the variance is summed per cluster over
each row's influence, lam (Yhat - mean)/N for unlabelled rows and (r - mean r)/n for labelled ones, with
the G/(G-1) correction statsmodels' cluster-robust covariance uses, so a cluster split between the
labelled and unlabelled rows carries its covariance too. With one row per cluster this is the formula
above times G/(G-1).

`ipw_mean` is the active-inference form (Zrnic & Candes 2024): row i was labelled with a known
probability pi_i (independently), and theta = mean_i[lam Yhat_i + (Y_i - lam Yhat_i) xi_i / pi_i] over
all rows is unbiased for every lam; its variance is that of those terms over the rows.

`hajek_mean` is the labels-only estimate under the same design: sum(Y/pi) / sum(1/pi) over the labelled
rows (Hajek's ratio), not ipw_mean's lam = 0 form sum(Y/pi) / N (Horvitz-Thompson). Both are
(asymptotically) unbiased, but only the ratio stays inside the labels' range: with five labels drawn at
pi = 0.01 the Horvitz-Thompson share of a yes/no question can read 1.4. Its standard error is the
linearised one, which is the HC1 robust standard error of a weighted least-squares fit of Y on a
constant with weights 1/pi (statsmodels computes the same, tests/stats/test_ppi.py checks it).

What none of this promises: coverage with few labels at a share near 0 or 1 (the normal approximation
fails there as the Wald interval does), or anything about rows outside the population the frame holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["MeanEstimate", "hajek_mean", "ipw_mean", "ppi_mean", "t_quantile", "tuned_lambda"]


@dataclass(frozen=True)
class MeanEstimate:
    """One estimate of a mean with its normal interval; `lam` the weight the model's answers got."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float
    n_labelled: int
    n_rows: int  # every row the estimate is about (labelled and not)

    @property
    def width(self) -> float:
        return self.high - self.low


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def t_quantile(level: float, df: float) -> float:
    """The two-sided `level` quantile of Student's t with `df` degrees of freedom (Hill's 1970 expansion
    in the normal quantile: within 1 % of the exact value for df >= 3, 0.1 % for df >= 5; checked against scipy)."""
    z = _z(level)
    if not math.isfinite(df):
        return z
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _interval(estimate: float, se: float, level: float, df: float = math.inf) -> tuple[float, float]:
    if not math.isfinite(se):
        return math.nan, math.nan
    half = t_quantile(level, df) * se
    return estimate - half, estimate + half


def tuned_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> float:
    """The variance-minimising lam of PPI++ for a mean, clipped to [0, 1] (0 when Yhat does not vary)."""
    n, big_n = len(y), len(yhat_unlabelled)
    if n < 2 or big_n < 1:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_unlabelled]), ddof=1))
    if var <= 0.0:
        return 0.0
    return float(np.clip(cov / ((1.0 + n / big_n) * var), 0.0, 1.0))


def _cluster_variance(influence: np.ndarray, clusters: np.ndarray) -> float:
    """Sum over clusters of the squared summed influence, times G/(G-1)."""
    _, codes = np.unique(clusters, return_inverse=True)
    sums = np.bincount(codes, weights=influence)
    g = len(sums)
    return float(np.sum(sums**2) * g / (g - 1)) if g > 1 else math.nan


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, *, lam: float | None = None,
             level: float = 0.95, clusters: np.ndarray | None = None,
             clusters_unlabelled: np.ndarray | None = None, small_sample: bool = True) -> MeanEstimate:
    """PPI++ estimate of mean(Y) from labelled (y, yhat) and unlabelled yhat; lam None: tuned.

    `small_sample` (default): the labelled part's variance with n - 1 and a t quantile with n - 1 (G - 1
    with clusters) degrees of freedom, which lifts the simulated coverage at 30 labels from 0.90-0.93 to
    nominal (bench/ppi_coverage.py); False is `ppi_py`'s normal interval exactly.

    `clusters` / `clusters_unlabelled`: one cluster id per labelled / unlabelled row (both or neither).
    Fewer than 2 labelled rows (or 2 clusters) leave the interval NaN: one label has no spread to read.
    """
    y, yhat, yu = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_unlabelled))
    if len(y) != len(yhat):
        raise ValueError("y and yhat must have one entry per labelled row")
    n, big_n = len(y), len(yu)
    if n == 0:
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, 0, n + big_n)
    if big_n == 0:
        lam = 0.0
    lam = tuned_lambda(y, yhat, yu) if lam is None else float(lam)
    rectifier = y - lam * yhat
    imputed = lam * yu.mean() if big_n else 0.0
    estimate = float(imputed + rectifier.mean())
    if (clusters is None) != (clusters_unlabelled is None):
        raise ValueError("give clusters for both the labelled and the unlabelled rows, or for neither")
    df = math.inf
    if clusters is not None:
        influence = np.concatenate([(rectifier - rectifier.mean()) / n,
                                    lam * (yu - yu.mean()) / big_n if big_n else np.zeros(0)])
        ids = np.concatenate([np.asarray(clusters), np.asarray(clusters_unlabelled)])
        var = _cluster_variance(influence, ids)
        df = max(len(np.unique(np.asarray(clusters))) - 1.0, 1.0)
    elif n < 2:
        var = math.nan
    else:
        ddof = 1 if small_sample else 0
        var = float(np.var(rectifier, ddof=ddof) / n + (lam**2 * np.var(yu) / big_n if big_n else 0.0))
        df = n - 1.0
    se = math.sqrt(var) if math.isfinite(var) else math.nan
    return MeanEstimate(estimate, *_interval(estimate, se, level, df if small_sample else math.inf), se, lam, n,
                        n + big_n)


def _labelled(y: np.ndarray, pi: np.ndarray, *others: np.ndarray) -> np.ndarray:
    """Which rows carry a label, once the design is checked: one entry per row, every pi in (0, 1]."""
    if any(len(a) != len(y) for a in (pi, *others)):
        raise ValueError("y, pi (and yhat) must have one entry per row")
    if np.any(~(pi > 0.0) | (pi > 1.0)):
        raise ValueError("pi must be in (0, 1] for every row: a row that could not be labelled breaks the estimate")
    labelled: np.ndarray = ~np.isnan(y)
    return labelled


def ipw_mean(y: np.ndarray, yhat: np.ndarray, pi: np.ndarray, *, lam: float | None = None,
             level: float = 0.95, small_sample: bool = True) -> MeanEstimate:
    """Active-inference estimate of mean(Y) over all rows: y is NaN where a row was not labelled, pi the
    probability each row had of being labelled (drawn independently), yhat every row's model answer."""
    y, yhat, pi = (np.asarray(a, dtype=np.float64) for a in (y, yhat, pi))
    xi = _labelled(y, pi, yhat)
    n = int(xi.sum())
    if n == 0:
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, 0, len(y))
    w = np.where(xi, 1.0 / pi, 0.0)
    yw = np.where(xi, y, 0.0) * w  # Y xi / pi
    hw = yhat * (1.0 - w)  # Yhat (1 - xi / pi)
    if lam is None:
        var_h = float(np.var(hw))
        lam = float(np.clip(-np.mean((hw - hw.mean()) * (yw - yw.mean())) / var_h, 0.0, 1.0)) if var_h > 0 else 0.0
    terms = yw + lam * hw
    estimate = float(terms.mean())
    se = math.sqrt(float(np.var(terms)) / len(terms)) if n >= 2 else math.nan
    df = n - 1.0 if small_sample else math.inf  # the labels carry the noise: t with n_labelled - 1
    return MeanEstimate(estimate, *_interval(estimate, se, level, df), se, float(lam), n, len(y))


def hajek_mean(y: np.ndarray, pi: np.ndarray, *, level: float = 0.95, small_sample: bool = True) -> MeanEstimate:
    """The labels-only mean of Y when row i was labelled with probability pi_i (y NaN where it was not):
    the inverse-probability-weighted mean of the labels, always inside their range."""
    y, pi = (np.asarray(a, dtype=np.float64) for a in (y, pi))
    xi = _labelled(y, pi)
    n = int(xi.sum())
    if n == 0:
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, 0.0, 0, len(y))
    w = 1.0 / pi[xi]
    estimate = float(np.sum(w * y[xi]) / np.sum(w))
    if n < 2:
        return MeanEstimate(estimate, math.nan, math.nan, math.nan, 0.0, n, len(y))
    influence = w * (y[xi] - estimate)  # each label's pull on the ratio, summing to 0
    se = math.sqrt(float(np.sum(influence**2)) * n / (n - 1)) / float(np.sum(w))
    df = n - 1.0 if small_sample else math.inf
    return MeanEstimate(estimate, *_interval(estimate, se, level, df), se, 0.0, n, len(y))
