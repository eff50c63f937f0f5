"""The cascade's guarantee, simulated on arrays (no gateway): over many seeds of synthetic rows with a
known proxy-score distribution and an oracle that knows the truth, the target is met in >= 1 - delta of
the runs, up to the simulation's own noise (3 binomial standard errors of the failure rate)."""

from __future__ import annotations

import numpy as np
import pytest

from gwlab.frames.cascade.spec import Cascade, choose_threshold, proxy_answers, sample_rows

RUNS = 300
ROWS = 3000
DELTA = 0.1
TOLERANCE = 3 * np.sqrt(DELTA * (1 - DELTA) / RUNS)  # 0.052: the failure rate's sampling noise over RUNS


def synthetic(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Truth (30 % positive) and a proxy P(true) that separates the classes imperfectly (about 95 % of
    its answers right: below the accuracy target, so the oracle is needed)."""
    rng = np.random.default_rng(10_000 + seed)
    truth = rng.random(ROWS) < 0.3
    logit = np.where(truth, 2.5, -2.5) + rng.normal(0, 1.5, ROWS)
    return truth, 1 / (1 + np.exp(-logit))


def achieved(metric: str, truth: np.ndarray, p: np.ndarray, seed: int, target: float) -> tuple[float, int]:
    """The metric the cascade's answers reach on the whole frame, and the oracle calls it made."""
    cascade = Cascade(oracle="oracle", metric=metric, target=target, delta=DELTA, sample=300, seed=seed)
    score = np.maximum(p, 1 - p) if metric == "accuracy" else p
    sampled = sample_rows(score, cascade)
    hits = ((p >= 0.5) == truth)[sampled] if metric == "accuracy" else truth[sampled]
    threshold = choose_threshold(score, sampled, hits, cascade)
    proxy = proxy_answers(score, threshold, metric)
    proxy[sampled] = False  # the oracle already answered these
    if metric == "accuracy":
        answer = np.where(proxy, p >= 0.5, truth)
        quality = float((answer == truth).mean())
    elif metric == "precision":
        answer = np.where(proxy, True, truth)
        quality = float(truth[answer].mean())
    else:
        answer = np.where(proxy, False, truth)
        quality = float(answer[truth].mean())
    return quality, int((~proxy).sum())


@pytest.mark.parametrize(("metric", "target"), [("accuracy", 0.98), ("precision", 0.9), ("recall", 0.9)])
def test_cascade_meets_its_target_in_at_least_one_minus_delta_of_runs(metric: str, target: float) -> None:
    runs = [achieved(metric, *synthetic(seed), seed, target) for seed in range(RUNS)]
    missed = np.mean([quality < target for quality, _ in runs])
    assert missed <= DELTA + TOLERANCE, f"{metric}: target missed in {missed:.3f} of runs"
    assert np.median([calls for _, calls in runs]) < ROWS  # and it does save oracle calls
