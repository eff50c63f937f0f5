"""The cascade's guarantee, simulated where it is hardest, with a check that can fail.

Each regime is one fixed frame (a proxy score per row and the truth, which the oracle knows) and `SEEDS`
seeds of the sample. The guarantee says the target is missed in at most delta of the seeds, so the
number of misses is at most Binomial(SEEDS, delta): the check fails when a one-sided binomial test rejects
"miss rate <= delta" at level `LEVEL` (`misses_allowed`). The regimes sit at the boundary: for accuracy
and precision the target lies just above the metric at one candidate threshold with every candidate
above it comfortably higher (so that candidate's test is the one that errs, at nearly delta), for recall
at the prevalences, samples and deltas where SUPG's correction is tightest. The same check run on
deliberately broken certificates (delta doubled, the point estimate for the bound, no correction, no
saturation) must fail, and a test asserts that it does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

from gwlab.stats import cascade as core
from tests.support.guarantee import (
    LEVEL,
    REAL_CORRECTION,
    SEEDS,
    Goal,
    Regime,
    cascade_once,
    holds,
    misses,
    misses_allowed,
)


def boundary(metric: str, sample: int, delta: float, rows: int = 50_000) -> Regime:
    """A frame where the 6th candidate from the top is the edge: every row above the 5th is good, the rows
    between them are good at a rate that puts the metric there just below the target (an accuracy of
    0.99, a precision of 0.95), the rest at 0.5. The first five candidates pass easily and the sixth's
    test errs at nearly delta: the hardest place for a fixed-sequence certificate. The sample is 1 % of
    the rows, so the oracle's answers on it lift the delivered accuracy by about 1e-4 only."""
    rng = np.random.default_rng(7)
    score = rng.uniform(0.5, 1.0, rows)
    goal = Goal(metric, 0.5, delta, sample)
    grid = np.unique(np.quantile(score, np.linspace(0, 1, goal.candidates, endpoint=False)))[::-1]
    rate = np.where(score >= grid[4], 1.0, np.where(score >= grid[5], 0.8 if metric == "accuracy" else 0.7, 0.5))
    good = rng.random(rows) < rate
    kept = score >= grid[5]
    value = 1 - (kept & ~good).mean() + 2e-4 if metric == "accuracy" else good[kept].mean() + 1e-6
    return Regime(f"{metric} boundary n={sample} delta={delta}", score, good, replace(goal, target=float(value)))


def prevalence(p: float, sample: int, delta: float, target: float = 0.9, rows: int = 3000) -> Regime:
    """A recall frame: `p` of the rows positive, the proxy's logit separating them imperfectly."""
    rng = np.random.default_rng(1)
    truth = np.zeros(rows, dtype=bool)
    truth[rng.choice(rows, max(1, round(p * rows)), replace=False)] = True
    logit = np.where(truth, 2.0, -2.0) + rng.normal(0, 1.5, rows) + np.log(p / (1 - p))
    return Regime(f"recall p={p} n={sample} delta={delta} target={target}", 1 / (1 + np.exp(-logit)), truth,
                  Goal("recall", target, delta, sample))


ACCURACY = [boundary("accuracy", 500, 0.1), boundary("accuracy", 500, 0.05)]
PRECISION = [boundary("precision", 500, 0.1), boundary("precision", 500, 0.2)]
RECALL = [prevalence(0.01, 100, 0.1), prevalence(0.03, 40, 0.1), prevalence(0.13, 40, 0.1),
          prevalence(0.01, 1000, 0.2, 0.8), prevalence(0.03, 300, 0.2), prevalence(0.03, 1000, 0.2, 0.95),
          prevalence(0.1, 300, 0.2), prevalence(0.3, 30, 0.2, 0.8), prevalence(0.3, 100, 0.05)]


@pytest.mark.parametrize("regime", ACCURACY + PRECISION + RECALL, ids=lambda r: r.name)
def test_cascade_misses_its_target_in_at_most_delta_of_seeds(regime: Regime) -> None:
    found, allowed = misses(regime), misses_allowed(SEEDS, regime.goal.delta)
    assert found <= allowed, f"{regime.name}: missed in {found} of {SEEDS} seeds (at most {allowed} allowed)"


def test_boundary_regimes_are_hard_enough_to_catch_a_doubled_delta() -> None:
    """The accuracy and precision regimes sit where the certificate errs at nearly delta: a correct one
    misses in more than a quarter of delta's seeds, so the check is not passed by being far from the edge."""
    for regime in ACCURACY + PRECISION:
        assert misses(regime) > SEEDS * regime.goal.delta / 4, regime.name


def doubled_delta(score: np.ndarray, sampled: np.ndarray, hits: np.ndarray, goal: Goal) -> core.Threshold:
    return core.choose_threshold(score, sampled, hits, replace(goal, delta=min(0.99, 2 * goal.delta)))


@contextmanager
def patched(name: str, mutant: Callable[..., float]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(core, name, mutant)
        yield


def point_estimate(k: int, n: int, delta: float) -> float:
    return k / n if n else 0.0


def no_correction(a: np.ndarray, mass: np.ndarray, target: float, delta: float) -> float:
    return target


def no_saturation(a: np.ndarray, mass: np.ndarray, target: float, delta: float) -> float:
    """The bug of issue 31: a saturated target keeps the lowest sampled positive as the threshold."""
    return min(REAL_CORRECTION(a, mass, target, delta), 1 - 1e-9)


@pytest.mark.parametrize(("mutant", "regimes"), [
    ("doubled delta", ACCURACY + PRECISION),
    ("point estimate", ACCURACY + PRECISION),
    ("no correction", RECALL),
    ("no saturation", RECALL)])
def test_a_broken_certificate_fails_the_same_check(mutant: str, regimes: list[Regime]) -> None:
    for regime in regimes:
        if mutant == "doubled delta":
            broken = holds(regime, doubled_delta)
        else:
            name, fake = {"point estimate": ("lower_bound", point_estimate),
                          "no correction": ("corrected_target", no_correction),
                          "no saturation": ("corrected_target", no_saturation)}[mutant]
            with patched(name, fake):
                broken = holds(regime)
        if not broken:
            return
    pytest.fail(f"the {mutant} mutant passed every regime: the check cannot tell it from the real certificate")


def test_misses_allowed_matches_scipys_binomial_test() -> None:
    scipy = pytest.importorskip("scipy.stats")
    for seeds, delta in [(300, 0.05), (300, 0.1), (300, 0.2), (60, 0.1)]:
        m = misses_allowed(seeds, delta)
        assert scipy.binomtest(m, seeds, delta, alternative="greater").pvalue >= LEVEL
        assert scipy.binomtest(m + 1, seeds, delta, alternative="greater").pvalue < LEVEL


def test_nothing_certified_is_said_plainly_and_sends_every_row_to_the_oracle() -> None:
    regime = prevalence(0.01, 10, 0.1)
    goal = Goal("precision", 0.9, 0.1, 10)  # 10 sampled rows cannot certify 0.9 even if all are true
    sampled = core.sample_rows(regime.score, goal)
    threshold = core.choose_threshold(regime.score, sampled, regime.good[sampled], goal)
    assert not threshold.certified and np.isnan(threshold.bound) and threshold.value == np.inf
    assert "needs at least 22 sampled rows" in threshold.note and "every row went to the oracle" in threshold.note
    assert not core.proxy_answers(regime.score, threshold, "precision").any()


def test_a_saturated_recall_target_sends_every_row_to_the_oracle() -> None:
    regime = prevalence(0.03, 40, 0.1)  # few positives sampled: the corrected target reaches 1
    goal = replace(regime.goal, seed=3)
    sampled = core.sample_rows(regime.score, goal)
    threshold = core.choose_threshold(regime.score, sampled, regime.good[sampled], goal)
    assert threshold.value == 0.0 and threshold.bound == 1.0 and "every row went to the oracle" in threshold.note
    assert not core.proxy_answers(regime.score, threshold, "recall").any()


def test_recall_saves_oracle_calls_where_the_sample_allows_it() -> None:
    """Importance sampling is what lets a 10 %-prevalence recall target save calls at 300 samples."""
    regime = prevalence(0.1, 300, 0.1)
    calls = []
    for seed in range(50):
        _, proxy = cascade_once(regime, seed)
        calls.append(int((~proxy).sum()))
    assert np.median(calls) < 0.5 * len(regime.score)
