"""`gwlab.compare_sequential` and its public form `gwlab.compare(..., sequential=gwlab.Sequential(...))`:
rounds stop once the sequence decides, B better is found with fewer rows than the budget, an A/A comparison
rarely decides, and a callable is called only on the rows it needs."""

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


def _as_compare(df: pd.DataFrame, a, b, truth, *, round_rows: int = 50, budget: int | None = None,
                margin: float = 0.0, seed: int = 0, alpha: float = 0.05) -> gwlab.SequentialComparison:
    """The public form: compare's `level` is 1 - alpha, the rounds' settings are a `gwlab.Sequential`."""
    return gwlab.compare(a, b, truth, level=1.0 - alpha,
                         sequential=gwlab.Sequential(df, round_rows=round_rows, budget=budget, margin=margin,
                                                     seed=seed))


FORMS = pytest.mark.parametrize("run", [gwlab.compare_sequential, _as_compare], ids=["compare_sequential", "compare"])


@FORMS
def test_a_better_prompt_is_found_before_the_budget_ends_and_only_those_rows_are_sent(run) -> None:
    df = _frame(0)
    sent: list[int] = []

    def b(rows: pd.DataFrame) -> pd.Series:
        sent.append(len(rows))
        return rows["b"]

    result = run(df, lambda rows: rows["a"], b, "label", round_rows=100)
    assert result.decision == "b better" and result.low > 0
    assert result.rows < len(df) and sum(sent) == result.rows
    assert "b better" in repr(result)


def test_a_a_comparisons_rarely_decide() -> None:  # compare's form is the same run (the test below)
    decided = 0
    for seed in range(40):
        df = _frame(seed, n=1500, b_edge=0.0)
        result = gwlab.compare_sequential(df, lambda rows: rows["a"], lambda rows: rows["b"], "label",
                                          round_rows=50, seed=seed)
        decided += result.decision != "unresolved"
    assert decided <= 2  # 0.05 of 40 is 2; the sequence's own level is simulated in tests/stats


def test_compare_level_is_the_sequence_alpha_and_a_label_series_works_like_the_column() -> None:
    df = _frame(3, n=3000, b_edge=0.08)
    answer_a, answer_b = (lambda rows: rows["a"]), (lambda rows: rows["b"])
    for alpha in (0.05, 0.2):
        direct = gwlab.compare_sequential(df, answer_a, answer_b, "label", round_rows=100, alpha=alpha)
        public = _as_compare(df, answer_a, answer_b, df["label"], round_rows=100, alpha=alpha)
        assert (public.rows, public.decision) == (direct.rows, direct.decision)
        assert public.low == pytest.approx(direct.low) and public.high == pytest.approx(direct.high)
    loose = _as_compare(df, answer_a, answer_b, "label", round_rows=100, alpha=0.2)
    strict = _as_compare(df, answer_a, answer_b, "label", round_rows=100, alpha=0.01)
    width = [run.trace["high"].iloc[0] - run.trace["low"].iloc[0] for run in (loose, strict)]
    assert width[0] < width[1]


def test_compare_sequential_form_refuses_answers_that_cannot_be_sent_naming_the_field() -> None:
    df = _frame(0, n=10)
    with pytest.raises(InvalidRequest, match=r"^a"):
        gwlab.compare(df["a"], lambda r: r["b"], "label", sequential=gwlab.Sequential(df))
    with pytest.raises(InvalidRequest, match=r"^sequential"):
        gwlab.compare(lambda r: r["a"], lambda r: r["b"], "label", sequential=True)  # type: ignore[call-overload]
    with pytest.raises(InvalidRequest, match=r"^truth"):
        gwlab.compare(lambda r: r["a"], lambda r: r["b"], ["x"], sequential=gwlab.Sequential(df))
    assert "10 rows" in repr(gwlab.Sequential(df))


def test_a_margin_can_end_the_run_as_equivalent() -> None:
    df = _frame(1, n=20000, b_edge=0.0)
    result = gwlab.compare_sequential(df, lambda rows: rows["a"], lambda rows: rows["a"], "label",
                                      round_rows=500, margin=0.05)
    assert result.decision == "within margin" and result.rows < len(df)


def test_an_unknown_label_column_is_refused_naming_truth() -> None:
    with pytest.raises(InvalidRequest, match="truth"):
        gwlab.compare_sequential(_frame(0, n=10), lambda r: r["a"], lambda r: r["b"], "nope")
