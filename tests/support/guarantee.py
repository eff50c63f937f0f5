"""The cascade guarantee's simulation check, shared by the synthetic suite (tests/stats) and the one on
real proxy scores (tests/frames): a regime is a frame and a goal; the check counts the seeds whose
delivered answers missed the target and fails when a one-sided binomial test rejects "miss rate <= delta"
at level `LEVEL`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from gwlab.stats import cascade as core
from gwlab.stats.intervals import binom_cdf

__all__ = ["LEVEL", "REAL_CORRECTION", "SEEDS", "Goal", "Regime", "achieved", "cascade_once", "holds", "misses",
           "misses_allowed"]

SEEDS = 300
LEVEL = 0.001  # the binomial test's level: a correct certificate fails the check about once in 1,000 suites


def misses_allowed(seeds: int, delta: float) -> int:
    """The most misses a correct certificate may show: the largest m with P(Bin(seeds, delta) >= m) >= LEVEL."""
    m = int(seeds * delta)
    while 1 - binom_cdf(m, seeds, delta)[0] >= LEVEL:  # P(X >= m + 1)
        m += 1
    return m


@dataclass(frozen=True)
class Goal:
    metric: str
    target: float
    delta: float
    sample: int
    seed: int = 0
    candidates: int = 20


@dataclass(frozen=True)
class Regime:
    """A frame and a goal: `score` per row (what the threshold is on), `good` per row (accuracy: the
    proxy is right; precision, recall: the oracle says true)."""

    name: str
    score: np.ndarray
    good: np.ndarray
    goal: Goal


def cascade_once(regime: Regime, seed: int, choose: Callable[..., core.Threshold] = core.choose_threshold
                 ) -> tuple[core.Threshold, np.ndarray]:
    """One seed's cascade on the regime's frame: its threshold, and per row whether the proxy answers it
    (never a sampled row: the oracle answered those)."""
    goal = replace(regime.goal, seed=seed)
    sampled = core.sample_rows(regime.score, goal)
    threshold = choose(regime.score, sampled, regime.good[sampled], goal)
    proxy = core.proxy_answers(regime.score, threshold, goal.metric)
    proxy[sampled] = False
    return threshold, proxy


def achieved(regime: Regime, seed: int, choose: Callable[..., core.Threshold]) -> float:
    """What the guarantee speaks of, on the whole frame: accuracy of the delivered answers; precision of
    the rows the proxy answers true; recall of the delivered answers."""
    goal = regime.goal
    _, proxy = cascade_once(regime, seed, choose)
    if goal.metric == "accuracy":
        return float(1 - (proxy & ~regime.good).mean())
    if goal.metric == "precision":
        return float(regime.good[proxy].mean()) if proxy.any() else 1.0
    return float(1 - (proxy & regime.good).sum() / regime.good.sum())


def misses(regime: Regime, choose: Callable[..., core.Threshold] | None = None) -> int:
    """Seeds in which the target was missed (the real certificate's count is computed once per regime)."""
    real = choose is None and (core.lower_bound, core.corrected_target) == (REAL_BOUND, REAL_CORRECTION)
    if real and regime.name in _REAL:
        return _REAL[regime.name]
    found = sum(achieved(regime, seed, choose or core.choose_threshold) < regime.goal.target for seed in range(SEEDS))
    if real:
        _REAL[regime.name] = found
    return found


_REAL: dict[str, int] = {}
REAL_BOUND, REAL_CORRECTION = core.lower_bound, core.corrected_target  # what the mutants replace


def holds(regime: Regime, choose: Callable[..., core.Threshold] | None = None) -> bool:
    return misses(regime, choose) <= misses_allowed(SEEDS, regime.goal.delta)


