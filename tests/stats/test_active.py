"""Active labelling probabilities and the PPI power planner: the budget is kept, uncertain rows favoured,
the planner's mix is the cheapest on a brute-force grid, and the planned labels reach the target width in
simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gwlab.stats.active import labelling_probabilities, plan_sizes
from gwlab.stats.ppi import ppi_mean


def test_probabilities_keep_the_budget_favour_uncertain_rows_and_stay_in_range() -> None:
    p = np.concatenate([np.full(500, 0.5), np.full(500, 0.02), np.full(5, 0.5)])
    pi = labelling_probabilities(p, 100)
    assert pi.sum() == pytest.approx(100)
    assert pi[0] > 2 * pi[600] > 0 and np.all(pi <= 1)


def test_probabilities_cap_at_one_and_pass_the_excess_on() -> None:
    p = np.concatenate([np.full(10, 0.5), np.full(90, 0.001)])
    pi = labelling_probabilities(p, 30)
    assert np.all(pi[:10] == 1.0) and pi.sum() == pytest.approx(30)


def test_the_planned_mix_is_the_cheapest_on_a_grid() -> None:
    a, b, half = 0.12, 0.05, 0.03
    plan = plan_sizes(a, b, half, cost_per_label=2.0, cost_per_row=0.01)
    s2 = (half / 1.959963984540054) ** 2
    best = min(n * 2.0 + big_n * 0.01 for n in range(50, 2000, 5) for big_n in range(100, 200000, 100)
               if a / n + b / big_n <= s2)
    assert plan.cost == pytest.approx(best, rel=0.02)


def test_planned_labels_at_the_rows_in_hand_reach_the_target_width_in_simulation() -> None:
    rng = np.random.default_rng(3)
    big_n, half = 5000, 0.04
    truth = rng.random(big_n) < 0.3
    p = np.clip(np.where(truth, 0.7, 0.25) + rng.normal(0, 0.12, big_n), 0, 1)
    lam = 0.8
    plan = plan_sizes(float(np.var(truth - lam * p)), lam**2 * float(np.var(p)), half, current_rows=big_n)
    n = math.ceil(plan.labels_at_current_rows)
    widths = []
    for _ in range(200):
        chosen = rng.choice(big_n, n, replace=False)
        mask = np.zeros(big_n, dtype=bool)
        mask[chosen] = True
        widths.append(ppi_mean(truth[mask].astype(float), p[mask], p[~mask], lam=lam).width / 2)
    assert np.mean(widths) == pytest.approx(half, rel=0.1)
