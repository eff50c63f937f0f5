"""Which rows to label and how many: active-inference labelling probabilities and a PPI power planner.

Sampling (Zrnic & Candes, "Active statistical inference", ICML 2024): the variance of the IPW estimate
(`ppi.ipw_mean`) is smallest when row i is labelled with probability proportional to the spread of
its label around the model's answer, sqrt(E[(Y - Yhat)^2 | x]); for a calibrated P(true) that is
sqrt(p (1 - p)). A share `floor` of the budget is spread uniformly so no row's weight 1/pi explodes when
the model is confidently wrong. Rows are drawn independently (Poisson sampling), as `ipw_mean` assumes,
so the number drawn varies around the budget.

Planning: the PPI++ standard error is se^2 = a/n + b/N with a = var(Y - lam Yhat) (from the labels in
hand) and b = lam^2 var(Yhat); the cheapest (n, N) reaching a target half-width at cost c_label per label
and c_row per model row follows from a Lagrange multiplier (the `ppi_power` problem of `ppi_py`):
n = sqrt(a) S / (s^2 sqrt(c_label)), N = sqrt(b) S / (s^2 sqrt(c_row)), S = sqrt(a c_label) + sqrt(b c_row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["Plan", "labelling_probabilities", "plan_sizes"]


def labelling_probabilities(yhat: np.ndarray, budget: float, *, floor: float = 0.2) -> np.ndarray:
    """Each row's probability of being labelled: expected total `budget`, favouring rows whose model answer
    (a probability) is least sure; `floor` the share of the budget spread evenly."""
    p = np.clip(np.asarray(yhat, dtype=np.float64), 0.0, 1.0)
    n = len(p)
    if not 0 < budget <= n:
        raise ValueError(f"budget must be in (0, {n}]; got {budget}")
    spread = np.sqrt(p * (1.0 - p))
    share = spread / spread.sum() if spread.sum() > 0 else np.full(n, 1.0 / n)
    pi = budget * ((1.0 - floor) * share + floor / n)
    for _ in range(n):  # rows above 1 are labelled for sure; their excess goes to the others
        over = pi > 1.0
        if not over.any():
            break
        excess = float(np.sum(pi[over] - 1.0))
        pi[over] = 1.0
        free = pi < 1.0
        pi[free] += excess * pi[free] / pi[free].sum()
    return np.minimum(pi, 1.0)


@dataclass(frozen=True)
class Plan:
    """The cheapest (labels, model rows) for a target half-width, and labels needed at the rows in hand."""

    labels: int
    rows: int
    cost: float
    labels_at_current_rows: float  # inf when the model rows in hand alone leave the target out of reach


def plan_sizes(residual_var: float, model_var: float, half_width: float, *, level: float = 0.95,
               cost_per_label: float = 1.0, cost_per_row: float = 0.0, current_rows: int = 0) -> Plan:
    """Sizes for se <= half_width / z, from a = `residual_var` (var(Y - lam Yhat)) and b = `model_var`
    (lam^2 var(Yhat)); a model row costing nothing makes N unbounded, so then N = `current_rows`."""
    if half_width <= 0:
        raise ValueError("half_width must be positive")
    s2 = (half_width / NormalDist().inv_cdf(0.5 + level / 2.0)) ** 2
    a, b = max(residual_var, 1e-12), max(model_var, 0.0)
    at_current = a / (s2 - b / current_rows) if current_rows and s2 > b / current_rows else math.inf
    if cost_per_row <= 0 or b == 0:
        labels = math.ceil(at_current) if math.isfinite(at_current) else math.ceil(a / s2)
        rows = current_rows if math.isfinite(at_current) else 0
        return Plan(labels, rows, labels * cost_per_label + rows * max(cost_per_row, 0.0), at_current)
    total = math.sqrt(a * cost_per_label) + math.sqrt(b * cost_per_row)
    labels = math.ceil(math.sqrt(a) * total / (s2 * math.sqrt(cost_per_label)))
    rows = math.ceil(math.sqrt(b) * total / (s2 * math.sqrt(cost_per_row)))
    return Plan(labels, rows, labels * cost_per_label + rows * cost_per_row, at_current)
