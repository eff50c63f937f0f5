"""`gwlab.label_plan`: a recorded draw that `estimate(label_prob=)` turns into a valid interval, existing
labels kept at probability 1, and a sized plan for a target width."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.errors import InvalidRequest


def _frame(seed: int, n: int = 1500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.3
    p = np.clip(np.where(truth, 0.75, 0.3) + rng.normal(0, 0.15, n), 0, 1)  # overstates refunds
    return pd.DataFrame({"refund__noul": p, "truth": truth, "label": None})


def test_plan_then_estimate_with_label_prob_covers_the_true_share() -> None:
    hits, sims = 0, 300
    for seed in range(sims):
        df = _frame(seed)
        plan = gwlab.label_plan(df, "refund", budget=60, seed=10_000 + seed)  # not the data's seed
        df["label_prob"] = plan.probabilities
        df.loc[plan.rows, "label"] = df.loc[plan.rows, "truth"].map({True: "yes", False: "no"})
        row = gwlab.estimate(df, truth="label", prob="refund", label_prob="label_prob").iloc[0]
        hits += row["low"] <= df.truth.mean() <= row["high"]
    assert hits / sims >= 0.93


def test_ignoring_the_probabilities_is_a_biased_mutant() -> None:
    errors = []
    for seed in range(100):
        df = _frame(seed)
        plan = gwlab.label_plan(df, "refund", budget=200, seed=10_000 + seed)
        df.loc[plan.rows, "label"] = df.loc[plan.rows, "truth"].map({True: "yes", False: "no"})
        row = gwlab.estimate(df, truth="label", prob="refund", lam=0.0).iloc[0]  # unweighted labelled share
        errors.append(row["estimate"] - df.truth.mean())
    assert abs(np.mean(errors)) > 3 * np.std(errors) / 10  # a bias well beyond its Monte Carlo error


def test_rows_already_labelled_keep_probability_one_and_are_not_drawn_again() -> None:
    df = _frame(1)
    df.loc[df.index[:30], "label"] = "yes"
    plan = gwlab.label_plan(df, "refund", budget=40, truth="label")
    assert (plan.probabilities.iloc[:30] == 1.0).all()
    assert not set(plan.rows) & set(df.index[:30])
    uncertainty = (df.loc[plan.rows, "refund__noul"] - 0.5).abs().to_numpy()
    assert np.all(np.diff(uncertainty) >= 0)  # most uncertain first


def test_a_target_width_gives_labels_and_cost() -> None:
    df = _frame(2)
    df.loc[df.index[:80], "label"] = df.truth[:80].map({True: "yes", False: "no"})
    plan = gwlab.label_plan(df, "refund", budget=40, truth="label",
                            options=gwlab.PlanOptions(half_width=0.03, cost_per_label=0.5, cost_per_row=0.001))
    assert plan.sizes is not None and plan.sizes.labels > 80 and plan.sizes.cost > 0
    assert "labels" in repr(plan)


def test_a_budget_beyond_the_open_rows_is_refused_naming_budget() -> None:
    with pytest.raises(InvalidRequest, match="budget"):
        gwlab.label_plan(_frame(0, n=20), "refund", budget=50)
