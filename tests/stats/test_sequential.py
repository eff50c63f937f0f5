"""The paired-difference confidence sequence: type-I error at most alpha over 2,000 simulated A/A
comparisons looked at after every row, where a fixed-n z-interval looked at every 50 rows (the mutant)
fails; and on a true 3-point difference a decision with at least 30 % fewer rows on average than the
fixed-size paired z-test of equal power."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from gwlab.stats.sequential import confidence_sequence


def _paired(rng: np.random.Generator, sims: int, rows: int, b_only: float, a_only: float) -> np.ndarray:
    """Differences B right - A right per row: +1 with `b_only`, -1 with `a_only`, else 0."""
    u = rng.random((sims, rows))
    return np.where(u < b_only, 1.0, np.where(u < b_only + a_only, -1.0, 0.0))


def test_type_one_error_stays_below_alpha_over_2000_a_a_comparisons_seen_after_every_row() -> None:
    d = _paired(np.random.default_rng(0), 2000, 3000, 0.12, 0.12)
    for horizon in (None, 1000):
        cs = confidence_sequence(d, alpha=0.05, horizon=horizon)
        assert ((cs.low > 0) | (cs.high < 0)).any(axis=1).mean() <= 0.05


def test_a_fixed_n_interval_checked_at_every_look_is_a_mutant_that_fails() -> None:
    d = _paired(np.random.default_rng(0), 2000, 3000, 0.12, 0.12)
    looks = np.arange(50, 3001, 50)
    mean = np.cumsum(d, axis=1)[:, looks - 1] / looks
    sd = np.sqrt(np.cumsum(d**2, axis=1)[:, looks - 1] / looks - mean**2)
    assert (np.abs(mean) > 1.96 * sd / np.sqrt(looks)).any(axis=1).mean() > 0.05


def test_a_three_point_difference_is_decided_with_30_percent_fewer_rows_than_a_fixed_test_of_equal_power() -> None:
    budget, b_only, a_only = 6000, 0.13, 0.10
    cs = confidence_sequence(_paired(np.random.default_rng(1), 600, budget, b_only, a_only), horizon=2500)
    decided = (cs.low > 0) | (cs.high < 0)
    rows = np.where(decided.any(axis=1), decided.argmax(axis=1) + 1, budget)
    power = decided.any(axis=1).mean()
    assert (cs.high[decided.any(axis=1)] < 0).sum() == 0  # never decided the wrong way
    effect, var = b_only - a_only, b_only + a_only - (b_only - a_only) ** 2
    z = NormalDist().inv_cdf
    fixed = (z(0.975) + z(min(power, 0.999))) ** 2 * var / effect**2  # the paired z-test of equal power
    assert rows.mean() <= 0.7 * fixed


def test_differences_outside_minus_one_to_one_are_refused() -> None:
    with pytest.raises(ValueError, match="-1, 1"):
        confidence_sequence(np.array([0.5, 2.0]))


def test_first_exclusion_counts_rows_seen() -> None:
    cs = confidence_sequence(np.ones(200))
    first = cs.first_exclusion()
    assert first is not None and cs.low[first - 1] > 0 and (first == 1 or cs.low[first - 2] <= 0)
