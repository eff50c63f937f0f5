"""Cascades: the cheap model answers the rows it is sure of, an oracle (a better model, or people) the rest.

The statistical core works on arrays (a proxy score per row and, for sampled rows, what the oracle said)
so its guarantee can be simulated without a gateway; `run_cascade` in `frames/cascade/run.py` wires it
to `df.gw.decide`. Methods (see docs/guide/cascades.md for the exact guarantees):

- accuracy (the share of rows on which the cascade's answer agrees with the oracle's, as in BARGAIN):
  a uniform sample, an exact one-sided Clopper-Pearson lower bound on that share at each candidate,
  the candidates tested in a fixed order from the most confident down
  and stopped at the first failure (fixed-sequence testing, as in Learn-then-Test, Angelopoulos et al.
  2021, and BARGAIN, Zeighami et al. 2025), so no union bound over the candidates is paid;
- precision: the same scheme on the rows the proxy would call true (SUPG's uniform precision target,
  Kang et al., VLDB 2020, with exact binomial bounds and fixed-sequence testing instead of normal
  bounds and a union bound);
- recall: SUPG's importance-sampling recall target (IS-RT): rows sampled with probability proportional
  to sqrt(score), a normal-approximation correction of the target, and the largest threshold that meets
  it; rows at or above it go to the oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.stats.intervals import clopper_pearson, normal_quantile
from gwlab.wire.families import TEXT

__all__ = ["METRICS", "ORACLE_PROTOCOLS", "Cascade", "Threshold", "choose_threshold", "proxy_answers", "sample_rows"]

Metric = Literal["accuracy", "precision", "recall"]
METRICS: tuple[str, ...] = ("accuracy", "precision", "recall")
ORACLE_PROTOCOLS: tuple[str, ...] = ("decisions", *TEXT)
# a text oracle's answer is one short JSON object; the cap is what a budget reserves for it per row
ORACLE_MAX_TOKENS = 256
UNIFORM_SHARE = 0.1  # recall's sampling mixes this much uniform weight in (SUPG's defensive mixing)


@dataclass(frozen=True, slots=True)
class Cascade:
    """A cascade for `df.gw.decide(..., cascade=Cascade(...))`: the cheap model answers the confident rows.

    oracle: a model id, or a pandas Series of labels on the frame's index (people's answers: "automate
    the confident rows, send the rest to a person"). protocol: the family the oracle model is reached
    through: "decisions" (another decision model), or "chat", "responses", "messages" (a text model asked
    the same question, its answer held to the question's outcomes by a schema; max_tokens caps each
    answer). metric/target/delta: the guarantee (the metric is at least `target` with probability at
    least 1 - delta). sample: rows the oracle answers first, to set the threshold (seeded by `seed`);
    candidates: thresholds tried (quantiles of the scores); question: which question of the run
    (default: the only one).
    """

    oracle: Any
    metric: Metric = "accuracy"
    target: float = 0.9
    delta: float = 0.05
    sample: int = 100
    seed: int = 0
    candidates: int = 20
    question: str | None = None
    protocol: str = "decisions"
    max_tokens: int = ORACLE_MAX_TOKENS

    def __post_init__(self) -> None:
        if not (isinstance(self.oracle, pd.Series) or (isinstance(self.oracle, str) and self.oracle.strip())):
            raise InvalidRequest("oracle", f"a model id or a pandas Series of labels; got {type(self.oracle).__name__}")
        if self.metric not in METRICS:
            raise InvalidRequest("metric", f"one of {', '.join(METRICS)}; got {self.metric!r}")
        for name in ("target", "delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise InvalidRequest(name, f"a number strictly between 0 and 1; got {value!r}")
        for name in ("sample", "candidates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidRequest(name, f"a positive integer; got {value!r}")
        if self.protocol not in ORACLE_PROTOCOLS:
            raise InvalidRequest("protocol", f"one of {', '.join(ORACLE_PROTOCOLS)}; got {self.protocol!r}")
        if isinstance(self.oracle, pd.Series) and self.protocol != "decisions":
            raise InvalidRequest("protocol", "labels are not reached through a family: leave protocol unset")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidRequest("max_tokens", f"a positive integer; got {self.max_tokens!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidRequest("seed", f"an integer; got {self.seed!r}")

    def __repr__(self) -> str:
        oracle = f"<labels: {len(self.oracle)} rows>" if isinstance(self.oracle, pd.Series) else repr(self.oracle)
        via = "" if self.protocol == "decisions" else f", protocol={self.protocol!r}"
        return (f"Cascade(oracle={oracle}{via}, metric={self.metric!r}, target={self.target}, delta={self.delta}, "
                f"sample={self.sample}, seed={self.seed})")


@dataclass(frozen=True, slots=True)
class Threshold:
    """The chosen threshold and the sample's estimate of the guaranteed metric with its bound.

    accuracy/precision: the proxy answers rows whose score is >= `value` (inf: none);
    recall: the proxy answers "false" for rows whose score is < `value` (0: none).
    """

    value: float
    estimate: float  # the metric's estimate from the sample (NaN when no threshold is kept)
    bound: float  # its one-sided lower bound at level 1 - delta (recall: the corrected target)
    sampled: int  # rows the oracle answered for the sample
    successes: int  # the counts behind `estimate` (accuracy, precision; 0 and 0 for recall)
    trials: int


def sample_rows(scores: np.ndarray, cascade: Cascade) -> np.ndarray:
    """Positions to ask the oracle first (seeded): uniform without replacement (accuracy, precision), or
    with replacement with probability ~ sqrt(score) (recall, SUPG); repeats kept for the weights."""
    n = len(scores)
    if n == 0:
        return np.empty(0, dtype=int)
    rng = np.random.default_rng(cascade.seed)
    if cascade.metric != "recall":
        return np.sort(rng.choice(n, size=min(cascade.sample, n), replace=False))
    return rng.choice(n, size=cascade.sample, replace=True, p=_recall_weights(scores))


def _recall_weights(scores: np.ndarray) -> np.ndarray:
    root = np.sqrt(np.clip(scores, 0.0, 1.0))
    root = root / root.sum() if root.sum() > 0 else np.full(len(scores), 1 / len(scores))
    return (1 - UNIFORM_SHARE) * root + UNIFORM_SHARE / len(scores)


def choose_threshold(scores: np.ndarray, sampled: np.ndarray, hits: np.ndarray, cascade: Cascade) -> Threshold:
    """The threshold meeting the cascade's target with probability >= 1 - delta.

    `sampled` are positions from `sample_rows`; `hits[i]` is, for sampled row i, whether the proxy was
    right (accuracy) or whether the oracle says true (precision, recall).
    """
    scores, hits = np.asarray(scores, dtype=float), np.asarray(hits, dtype=bool)
    if cascade.metric == "recall":
        return _recall(scores, sampled, hits, cascade)
    return _fixed_sequence(scores, sampled, hits, cascade)


def _fixed_sequence(scores: np.ndarray, sampled: np.ndarray, hits: np.ndarray, cascade: Cascade) -> Threshold:
    """Fixed-sequence testing: candidates (quantiles of every row's proxy score, known before any oracle
    answer) from the highest down, each tested at level delta with an exact one-sided Clopper-Pearson
    lower bound; stop at the first that fails. Candidates with too few sampled rows to pass even with
    every answer right are skipped first (a choice made on the sample's scores, not its answers). The
    family-wise error is at most delta, so every accepted
    threshold, and the lowest one returned, meets the target with probability >= 1 - delta."""
    grid = np.unique(np.quantile(scores, np.linspace(0, 1, cascade.candidates, endpoint=False)))
    sample_scores = scores[sampled]
    best = Threshold(float("inf"), float("nan"), float("nan"), len(sampled), 0, 0)
    for t in grid[::-1]:
        k, n = _successes(sample_scores >= t, hits, cascade.metric)
        if not _bound(n, n, cascade) >= cascade.target:
            continue  # untestable: it would fail even with every answer right (depends on n, not on answers)
        low = _bound(k, n, cascade)
        if not low >= cascade.target:
            break
        best = Threshold(float(t), k / n, float(low), len(sampled), k, n)
    return best


def _bound(k: int, n: int, cascade: Cascade) -> float:
    """The exact one-sided lower bound at level 1 - delta on a proportion of k in n (0 when n is 0)."""
    return clopper_pearson(k, n, 1 - 2 * cascade.delta)[0] if n else 0.0


def _successes(kept: np.ndarray, hits: np.ndarray, metric: str) -> tuple[int, int]:
    """Accuracy: sampled rows on which the cascade's answer agrees with the oracle's (a row below the
    threshold is the oracle's own answer), over all sampled rows. Precision: sampled rows above the
    threshold the oracle calls true, over the sampled rows above it."""
    if metric == "accuracy":
        return int(len(hits) - (kept & ~hits).sum()), len(hits)
    return int(hits[kept].sum()), int(kept.sum())


def _recall(scores: np.ndarray, sampled: np.ndarray, positive: np.ndarray, cascade: Cascade) -> Threshold:
    """SUPG IS-RT: the largest threshold whose weighted recall estimate reaches the corrected target."""
    n, s = len(scores), len(sampled)
    mass = 1.0 / (n * _recall_weights(scores)[sampled]) * positive  # m_i * O(x_i)
    a = scores[sampled]
    if mass.sum() == 0:  # no positive sampled: nothing to bound, every row goes to the oracle
        return Threshold(0.0, float("nan"), float("nan"), len(np.unique(sampled)), 0, 0)
    tau = _largest_meeting(a, mass, cascade.target)
    z = normal_quantile(1 - cascade.delta / 2)
    above, below = mass * (a >= tau), mass * (a < tau)
    upper = above.mean() + z * above.std(ddof=1) / np.sqrt(s)
    lower = max(below.mean() - z * below.std(ddof=1) / np.sqrt(s), 0.0)
    corrected = min(1.0, upper / (upper + lower))
    tau = _largest_meeting(a, mass, corrected)
    estimate = float(mass[a >= tau].sum() / mass.sum())
    return Threshold(float(tau), estimate, float(corrected), len(np.unique(sampled)), 0, 0)


def _largest_meeting(a: np.ndarray, mass: np.ndarray, target: float) -> float:
    """The largest sampled score t with sum(mass[a >= t]) / sum(mass) >= target."""
    order = np.argsort(-a, kind="stable")
    recall = np.cumsum(mass[order]) / mass.sum()
    first = int(np.argmax(recall >= target - 1e-12))
    return float(a[order][first])


def proxy_answers(scores: np.ndarray, threshold: Threshold, metric: str) -> np.ndarray:
    """Per row, whether the proxy answers it (the rest go to the oracle)."""
    if metric == "recall":
        return scores < threshold.value
    return scores >= threshold.value
