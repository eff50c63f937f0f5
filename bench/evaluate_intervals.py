"""`gwlab.evaluate` with intervals and `gwlab.compare` on large synthetic sets: within 5 s each?

    python bench/evaluate_intervals.py                    # 100,000 rows x 4 questions, 1,000 resamples
    python bench/evaluate_intervals.py --rows 20000       # a reduced run

Synthetic answers (no gateway): two noul questions, a 5-option choice and a 4-level score, for two
runs A and B on the same rows. Times are wall-clock, best of `--repeat`. The peers, timed in the same
run on one metric (Brier of one question, 1,000 percentile resamples): a naive loop drawing a
resample's row indices and recomputing the metric each time, and scipy.stats.bootstrap (if installed).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

import gwlab

NOUL, CHOICE, SCORE = ("urgent", "refund"), "team", "severity"


def answers(rows: int, seed: int, truth: pd.DataFrame | None = None) -> pd.DataFrame:
    """One run's answer columns (and labels drawn from run A's probabilities when `truth` is None)."""
    rng = np.random.default_rng(seed)
    out = {}
    for q in NOUL:
        out[f"{q}__noul"] = rng.beta(2, 2, rows)
    team = rng.dirichlet(np.ones(5), rows)
    severity = rng.dirichlet(np.ones(4), rows)
    out |= {f"{CHOICE}__p__o{i}": team[:, i] for i in range(5)}
    out[f"{CHOICE}__choice"] = np.array([f"o{i}" for i in range(5)])[team.argmax(axis=1)]
    out |= {f"{SCORE}__p__{i}": severity[:, i] for i in range(4)}
    out[f"{SCORE}__score"] = severity @ np.arange(4)
    frame = pd.DataFrame(out, index=pd.RangeIndex(rows, name="id"))
    if truth is None:
        truth = pd.DataFrame({q: rng.uniform(size=rows) < frame[f"{q}__noul"] for q in NOUL}, index=frame.index)
        truth[CHOICE] = [f"o{i}" for i in _draw(rng, team)]
        truth[SCORE] = _draw(rng, severity)
    return frame.join(truth.add_prefix("label_"))


def _draw(rng: np.random.Generator, proba: np.ndarray) -> np.ndarray:
    return (rng.uniform(size=(len(proba), 1)) > proba.cumsum(axis=1)).sum(axis=1).clip(0, proba.shape[1] - 1)


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def naive_brier(p: np.ndarray, y: np.ndarray, resamples: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    values = [np.mean((p[i] - y[i]) ** 2) for i in (rng.integers(0, len(p), len(p)) for _ in range(resamples))]
    return tuple(np.quantile(values, [0.025, 0.975]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    a = answers(args.rows, 1)
    labels = a[[c for c in a.columns if c.startswith("label_")]].rename(columns=lambda c: c[6:])
    b = answers(args.rows, 2, labels)
    truth = {q: f"label_{q}" for q in (*NOUL, CHOICE, SCORE)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev_time = best(lambda: gwlab.evaluate(a, truth=truth, resamples=args.resamples), args.repeat)
        base = best(lambda: gwlab.evaluate(a, truth=truth, resamples=1), 1)
        cmp_time = best(lambda: gwlab.compare(a, b, truth={q: labels[q] for q in truth},
                                              resamples=args.resamples), args.repeat)
    p, y = a["urgent__noul"].to_numpy(), a["label_urgent"].to_numpy(float)
    naive = best(lambda: naive_brier(p, y, args.resamples), 1)
    load = os.getloadavg()[0]
    print(f"rows {args.rows:,} x 4 questions, {args.resamples} resamples (best of {args.repeat}), "
          f"{os.cpu_count()} cores, load average {load:.1f}")
    print(f"evaluate with intervals, 4 questions x every metric: {ev_time:.2f} s "
          f"(of which its point estimates and tables, 1 resample: {base:.2f} s)")
    print(f"compare A vs B, 4 questions x every metric: {cmp_time:.2f} s")
    print(f"peer, naive index loop, Brier of 1 question: {naive:.2f} s "
          f"({naive * 4 * 2:.1f} s for Brier alone of 4 questions in a comparison)")
    try:
        from scipy import stats
    except ImportError:
        return 0
    per_row = (p - y) ** 2
    scipy_time = best(lambda: stats.bootstrap((per_row,), np.mean, n_resamples=args.resamples,
                                              method="percentile", random_state=0), 1)
    print(f"peer, scipy.stats.bootstrap (percentile), Brier of 1 question: {scipy_time:.2f} s "
          f"({scipy_time / ev_time:.1f}x evaluate's time for 4 questions x every metric)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
