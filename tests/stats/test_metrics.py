"""Metric definitions of gwlab/stats/metrics.py checked against scipy on the same data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from gwlab.stats.metrics import auc


@pytest.mark.parametrize("seed", range(5))
def test_auc_is_scipys_mann_whitney_u_over_the_pairs_ties_included(seed):
    rng = np.random.default_rng(seed)
    y = rng.random(200) < 0.2
    score = np.round(rng.random(200) + 0.5 * y, 1)  # rounded: many ties, as softmax outputs of near texts
    u = mannwhitneyu(score[y], score[~y]).statistic
    assert auc(score, y) == pytest.approx(u / (y.sum() * (~y).sum()), abs=1e-12)


def test_auc_of_degenerate_samples():
    assert np.isnan(auc(np.array([0.2, 0.9]), np.array([True, True])))  # no false row: undefined
    assert np.isnan(auc(np.array([]), np.array([], dtype=bool)))
    assert auc(np.array([0.5, 0.5, 0.5]), np.array([True, False, False])) == 0.5  # every score tied
    assert auc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0
    assert auc(np.array([0.9, 0.1]), np.array([False, True])) == 0.0


def test_auc_is_unchanged_by_an_increasing_map_and_reversed_by_a_decreasing_one():
    rng = np.random.default_rng(7)
    y = rng.random(300) < 0.3
    score = rng.random(300) + 0.3 * y
    assert auc(1 / (1 + np.exp(-3 * score + 1)), y) == pytest.approx(auc(score, y), abs=1e-12)
    assert auc(-score, y) == pytest.approx(1 - auc(score, y), abs=1e-12)
