"""`compare`'s verdict holds its level across everything it names (issue 31 point 6).

A/A: two runs of the same model (independent draws of the same calibrated probabilities) on the same
rows, two questions (noul and a 3-option choice), six metrics each. The verdict names a difference when
any of the twelve adjusted p-values is below alpha; over SEEDS comparisons that must happen at most as
often as alpha allows, up to the binomial tolerance of SEEDS draws (its 99.9 % quantile). The same
p-values corrected by mutants (none; Holm across questions only, per metric, as before) must fail
it, so the test can fail. The comparisons run once (a module fixture); each correction reads them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

import gwlab
from gwlab.frames.evaluation import compare as compare_module
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.stats import intervals

SEEDS, ROWS, ALPHA = 400, 120, 0.05
TOLERATED = int(binom.ppf(0.999, SEEDS, ALPHA))  # most false verdicts a valid test shows in SEEDS A/A runs
OPTIONS = ("billing", "tech", "sales")


def _side(rng: np.random.Generator, p_true: np.ndarray, p_team: np.ndarray, index: pd.Index) -> pd.DataFrame:
    """One run's answers: the population probabilities, blurred by this run's own noise."""
    noul = np.clip(p_true + rng.normal(0, 0.08, len(p_true)), 0.01, 0.99)
    team = p_team * rng.dirichlet(np.full(3, 20.0), len(p_team))
    team /= team.sum(axis=1, keepdims=True)
    out = pd.DataFrame({"urgent__noul": noul}, index=index)
    for k, option in enumerate(OPTIONS):
        out[f"team__p__{option}"] = team[:, k]
    out["team__choice"] = np.array(OPTIONS)[team.argmax(axis=1)]
    return out


@pytest.fixture(scope="module")
def p_values() -> list[np.ndarray]:
    """Each A/A comparison's raw p-values (12: two questions x six metrics), from `gwlab.compare` itself,
    whose verdict is checked to name a difference exactly when an adjusted p-value is below alpha."""
    found = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        index = pd.RangeIndex(ROWS)
        p_true = rng.beta(1.2, 1.2, ROWS)
        p_team = rng.dirichlet(np.ones(3), ROWS)
        truth = pd.DataFrame({"urgent": rng.random(ROWS) < p_true,
                              "team": [OPTIONS[rng.choice(3, p=p)] for p in p_team]}, index=index)
        a, b = _side(rng, p_true, p_team, index), _side(rng, p_true, p_team, index)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvaluationWarning)
            comparison = gwlab.compare(a, b, truth=truth, level=1 - ALPHA, seed=seed)
        called = bool((comparison.table["p_adjusted"] < ALPHA).any())
        assert ("more accurate" in comparison.verdict or "significant:" in comparison.verdict) == called
        assert len(comparison.table) == 12
        assert compare_module.adjusted(comparison.table["p_value"].to_numpy()) == pytest.approx(
            comparison.table["p_adjusted"].to_numpy())  # the correction tested below is the one compare used
        found.append(comparison.table["p_value"].to_numpy())
    return found


def _false_verdicts(p_values: list[np.ndarray], correction) -> int:
    """How many A/A comparisons get a verdict naming a difference under `correction`."""
    return sum(bool((correction(p) < ALPHA).any()) for p in p_values)


def _per_metric_holm(p: np.ndarray) -> np.ndarray:
    """The old correction: Holm across the questions, separately for each metric (six families)."""
    table = p.reshape(2, -1)
    return np.column_stack([intervals.holm(table[:, m]) for m in range(table.shape[1])]).ravel()


def test_a_a_comparisons_get_a_false_verdict_no_more_often_than_alpha(p_values):
    called = _false_verdicts(p_values, compare_module.adjusted)
    assert called <= TOLERATED, f"{called} of {SEEDS} A/A verdicts named a difference (at most {TOLERATED})"


@pytest.mark.parametrize("mutant", [lambda p: p, _per_metric_holm], ids=["no correction", "holm per metric"])
def test_the_a_a_check_fails_a_verdict_without_the_correction(p_values, mutant):
    called = _false_verdicts(p_values, mutant)
    assert called > TOLERATED, f"the mutant passed: {called} of {SEEDS} (tolerated {TOLERATED})"
