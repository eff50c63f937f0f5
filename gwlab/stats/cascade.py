"""A cascade's threshold and its certificate, on arrays: proxy scores, sampled positions, oracle answers.

What each metric certifies (docs/guide/cascades.md, "The guarantee, exactly"):

- accuracy, precision: a uniform sample without replacement; candidate thresholds (quantiles of every
  row's score, fixed before any oracle answer) tested from the most confident down with an exact
  one-sided Clopper-Pearson lower bound at level 1 - delta, stopping at the first failure
  (fixed-sequence testing, as in Learn-then-Test and BARGAIN): exact, no union bound paid.
- recall: SUPG's importance-sampling recall target (IS-RT, Kang et al., VLDB 2020): rows drawn with
  replacement with probability ~ sqrt(score) (mixed with `UNIFORM_SHARE` uniform, which bounds every
  weight), weighted estimates, a target raised by normal bounds at delta/2, and, as SUPG's reference
  selector does, every row to the oracle when the raised target reaches 1 ("saturated").

`Threshold.bound` is what the certificate supports: the target when a threshold is certified, 1 when
every row went to the oracle (the delivered answers are the oracle's own), NaN when nothing could be
certified; `note` says why in words.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gwlab.stats.intervals import clopper_pearson, normal_quantile

__all__ = ["UNIFORM_SHARE", "Goal", "Threshold", "choose_threshold", "proxy_answers", "recall_weights",
           "rows_needed", "sample_rows"]

UNIFORM_SHARE = 0.1  # recall's sampling mixes this much uniform weight in (so no row weighs over 10x)


class Goal(Protocol):
    """What a cascade asks for (`gwlab.Cascade` is one): the metric, its target, the risk and the sample."""

    # read-only (properties) so a frozen dataclass satisfies it
    @property
    def metric(self) -> str: ...
    @property
    def target(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def sample(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def candidates(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Threshold:
    """The chosen threshold, the sample's point estimate at it and what the certificate supports.

    accuracy/precision: the proxy answers rows whose score is >= `value` (inf: none);
    recall: the proxy answers "false" for rows whose score is < `value` (0: none).
    """

    value: float
    estimate: float  # the sample's point estimate at `value` (NaN when no threshold is kept)
    bound: float  # the certified lower bound at level 1 - delta: the target, 1.0 (all to the oracle) or NaN
    sampled: int  # distinct rows the oracle answered for the sample
    successes: int  # the counts behind `estimate` (accuracy, precision; 0 and 0 for recall)
    trials: int
    note: str = ""  # why every row went to the oracle, when it did

    @property
    def certified(self) -> bool:
        """Whether the delivered answers carry the guarantee (False: nothing could be certified)."""
        return not math.isnan(self.bound)


def recall_weights(scores: np.ndarray) -> np.ndarray:
    """Recall's sampling probabilities: sqrt(score), normalised, mixed with `UNIFORM_SHARE` uniform."""
    root = np.sqrt(np.clip(scores, 0.0, 1.0))
    root = root / root.sum() if root.sum() > 0 else np.full(len(scores), 1 / len(scores))
    return (1 - UNIFORM_SHARE) * root + UNIFORM_SHARE / len(scores)


def sample_rows(scores: np.ndarray, goal: Goal) -> np.ndarray:
    """Positions to ask the oracle first (seeded): uniform without replacement (accuracy, precision), or
    with replacement with probability `recall_weights` (recall); repeats kept for the weights."""
    n = len(scores)
    if n == 0:
        return np.empty(0, dtype=int)
    rng = np.random.default_rng(goal.seed)
    if goal.metric != "recall":
        return np.sort(rng.choice(n, size=min(goal.sample, n), replace=False))
    return rng.choice(n, size=goal.sample, replace=True, p=recall_weights(scores))


def rows_needed(target: float, delta: float) -> int:
    """The fewest sampled rows a threshold must have, every one right, for its exact one-sided lower
    bound at level 1 - delta to reach `target` (delta ** (1/n) >= target)."""
    return math.ceil(math.log(delta) / math.log(target))


def choose_threshold(scores: np.ndarray, sampled: np.ndarray, hits: np.ndarray, goal: Goal) -> Threshold:
    """The threshold meeting the goal's target with probability >= 1 - delta.

    `sampled` are positions from `sample_rows`; `hits[i]` is, for sampled row i, whether the proxy was
    right (accuracy) or whether the oracle says true (precision, recall).
    """
    scores, hits = np.asarray(scores, dtype=float), np.asarray(hits, dtype=bool)
    if goal.metric == "recall":
        return _recall(scores, np.asarray(sampled, dtype=int), hits, goal)
    return _fixed_sequence(scores, np.asarray(sampled, dtype=int), hits, goal)


def proxy_answers(scores: np.ndarray, threshold: Threshold, metric: str) -> np.ndarray:
    """Per row, whether the proxy answers it (the rest go to the oracle)."""
    if metric == "recall":
        return scores < threshold.value
    return scores >= threshold.value


@functools.lru_cache(maxsize=65_536)
def lower_bound(k: int, n: int, delta: float) -> float:
    """The exact one-sided lower bound at level 1 - delta on a proportion of k in n (0 when n is 0);
    cached, since every candidate of every run asks it and the bisection costs O(n) per step."""
    return clopper_pearson(k, n, 1 - 2 * delta)[0] if n else 0.0


def _fixed_sequence(scores: np.ndarray, sampled: np.ndarray, hits: np.ndarray, goal: Goal) -> Threshold:
    """Candidates from the highest down, each tested at level delta; stop at the first that fails.
    Candidates with too few sampled rows to pass even with every answer right are skipped first (a
    choice on the sample's scores, not its answers). The family-wise error is at most delta."""
    grid = np.unique(np.quantile(scores, np.linspace(0, 1, goal.candidates, endpoint=False)))
    sample_scores = scores[sampled]
    best: Threshold | None = None
    largest = 0
    for t in grid[::-1]:
        k, n = _successes(sample_scores >= t, hits, goal.metric)
        largest = max(largest, n)
        if not lower_bound(n, n, goal.delta) >= goal.target:
            continue  # untestable: it would fail even with every answer right (depends on n, not on answers)
        if not lower_bound(k, n, goal.delta) >= goal.target:
            break
        best = Threshold(float(t), k / n, float(goal.target), len(sampled), k, n)
    return best if best is not None else _uncertified(goal, len(sampled), largest)


def _uncertified(goal: Goal, sampled: int, largest: int) -> Threshold:
    """Nothing certified: every row goes to the oracle, and the note says what a certificate needs."""
    need = rows_needed(goal.target, goal.delta)
    where = "sampled rows" if goal.metric == "accuracy" else "sampled rows above a candidate threshold"
    why = (f"nothing could be certified: {goal.metric} >= {goal.target} at delta {goal.delta} needs at least "
           f"{need} {where}, all right, and the sample had at most {largest}" if largest < need else
           f"nothing could be certified: no candidate threshold passed {goal.metric} >= {goal.target} at "
           f"delta {goal.delta}")
    return Threshold(float("inf"), float("nan"), float("nan"), sampled, 0, 0,
                     why + "; every row went to the oracle")


def _successes(kept: np.ndarray, hits: np.ndarray, metric: str) -> tuple[int, int]:
    """Accuracy: sampled rows on which the cascade's answer agrees with the oracle's (a row below the
    threshold is the oracle's own answer), over all sampled rows. Precision: sampled rows above the
    threshold the oracle calls true, over the sampled rows above it."""
    if metric == "accuracy":
        return int(len(hits) - (kept & ~hits).sum()), len(hits)
    return int(hits[kept].sum()), int(kept.sum())


def _recall(scores: np.ndarray, sampled: np.ndarray, positive: np.ndarray, goal: Goal) -> Threshold:
    """SUPG IS-RT: the largest threshold whose weighted recall estimate reaches the corrected target;
    every row to the oracle when no positive was sampled or the corrected target reaches 1."""
    asked = len(np.unique(sampled))
    mass = positive / (len(scores) * recall_weights(scores)[sampled])  # m_i * O(x_i)
    a = scores[sampled]
    if mass.sum() == 0:
        return _everything(asked, "no positive in the sample")
    corrected = corrected_target(a, mass, goal.target, goal.delta)
    if corrected >= 1.0:
        return _everything(asked, "the corrected recall target reached 1 (too few sampled positives to bound "
                                  "the rest, as SUPG's reference selector handles it)")
    tau = _largest_meeting(a, mass, corrected)
    estimate = float(mass[a >= tau].sum() / mass.sum())
    return Threshold(tau, estimate, float(goal.target), asked, 0, 0)


def _everything(asked: int, why: str) -> Threshold:
    """Every row to the oracle: the delivered answers are the oracle's own, so their recall is 1."""
    return Threshold(0.0, 1.0, 1.0, asked, 0, 0, f"{why}: every row went to the oracle")


def corrected_target(a: np.ndarray, mass: np.ndarray, target: float, delta: float) -> float:
    """SUPG's raised target: at the first threshold meeting `target`, an upper bound on the weighted
    positives above it over that plus a lower bound on those below (normal bounds at delta/2 each)."""
    if len(mass) < 2:
        return 1.0  # one draw bounds nothing
    tau = _largest_meeting(a, mass, target)
    z, s = normal_quantile(1 - delta / 2), len(mass)
    above, below = mass * (a >= tau), mass * (a < tau)
    upper = above.mean() + z * above.std(ddof=1) / np.sqrt(s)
    lower = max(below.mean() - z * below.std(ddof=1) / np.sqrt(s), 0.0)
    corrected = upper / (upper + lower)
    return float(min(1.0, corrected)) if corrected == corrected else 1.0  # NaN (no spread): saturated


def _largest_meeting(a: np.ndarray, mass: np.ndarray, target: float) -> float:
    """The largest sampled score t with sum(mass[a >= t]) / sum(mass) >= target."""
    order = np.argsort(-a, kind="stable")
    recall = np.cumsum(mass[order]) / mass.sum()
    first = int(np.argmax(recall >= target - 1e-12))
    return float(a[order][first])
