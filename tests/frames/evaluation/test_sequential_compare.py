"""`gwlab.compare_sequential`: rounds stop once the sequence decides, B better is found with fewer rows
than the budget, an A/A comparison rarely decides, and a callable is called only on the rows it needs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.errors import InvalidRequest


def _frame(seed: int, n: int = 4000, b_edge: float = 0.15) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    label = rng.choice(["refund", "bug", "praise"], n)
    right_a = rng.random(n) < 0.6
    right_b = np.where(rng.random(n) < b_edge, True, right_a)  # B fixes some of A's misses
    wrong = np.where(label == "bug", "praise", "bug")
    return pd.DataFrame({"label": label, "a": np.where(right_a, label, wrong), "b": np.where(right_b, label, wrong)})


def test_a_better_prompt_is_found_before_the_budget_ends_and_only_those_rows_are_sent() -> None:
    df = _frame(0)
    sent: list[int] = []

    def b(rows: pd.DataFrame) -> pd.Series:
        sent.append(len(rows))
        return rows["b"]

    result = gwlab.compare_sequential(df, lambda rows: rows["a"], b, "label", round_rows=100)
    assert result.decision == "b better" and result.low > 0
    assert result.rows < len(df) and sum(sent) == result.rows
    assert "b better" in repr(result)


def test_a_a_comparisons_rarely_decide() -> None:
    decided = 0
    for seed in range(40):
        df = _frame(seed, n=1500, b_edge=0.0)
        result = gwlab.compare_sequential(df, lambda rows: rows["a"], lambda rows: rows["b"], "label",
                                          round_rows=50, seed=seed)
        decided += result.decision != "unresolved"
    assert decided <= 2  # 0.05 of 40 is 2; the sequence's own level is simulated in tests/stats


def test_a_margin_can_end_the_run_as_equivalent() -> None:
    df = _frame(1, n=20000, b_edge=0.0)
    result = gwlab.compare_sequential(df, lambda rows: rows["a"], lambda rows: rows["a"], "label",
                                      round_rows=500, margin=0.05)
    assert result.decision == "within margin" and result.rows < len(df)


def test_an_unknown_label_column_is_refused_naming_truth() -> None:
    with pytest.raises(InvalidRequest, match="truth"):
        gwlab.compare_sequential(_frame(0, n=10), lambda r: r["a"], lambda r: r["b"], "nope")
