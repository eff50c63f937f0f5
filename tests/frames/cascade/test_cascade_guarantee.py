"""The cascade's guarantee on real proxy scores: the local decision model's answers on the 312 labelled
support messages (computed once per module on the embedded gateway), the labels as the oracle, the array
core over `SEEDS` seeds, checked as tests/stats/test_cascade_guarantee.py checks synthetic frames
(tests/support/guarantee.py); and
one real `df.gw.decide(cascade=...)` run of issue 31's case: what it delivers is what gwlab.evaluate scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from tests.support.guarantee import SEEDS, Goal, Regime, cascade_once, misses, misses_allowed
from tests.support.messages import QUESTIONS, support_messages

ASKED = {"refund": QUESTIONS["refund"], "team": QUESTIONS["team"]}


@pytest.fixture(scope="module")
def messages() -> pd.DataFrame:
    return support_messages()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cascade") / "answers.sqlite"


@pytest.fixture(scope="module")
def proxy(messages: pd.DataFrame, gw: Gateway, store: Path) -> pd.DataFrame:
    """The cheap model's answers on every message, once for the module (checkpointed for the cascade)."""
    return messages.gw.decide("{text}", ASKED, gateway=gw, progress=False, checkpoint=store)


def regime(proxy: pd.DataFrame, messages: pd.DataFrame, goal: Goal) -> Regime:
    p, truth = proxy["refund__noul"].to_numpy(dtype=float), messages["refund"].to_numpy(dtype=bool)
    if goal.metric == "accuracy":
        return Regime(f"support refund {goal}", np.maximum(p, 1 - p), (p >= 0.5) == truth, goal)
    return Regime(f"support refund {goal}", p, truth, goal)


@pytest.mark.parametrize("goal", [Goal("recall", 0.9, 0.1, 40), Goal("recall", 0.9, 0.2, 100),
                                  Goal("recall", 0.8, 0.05, 200), Goal("precision", 0.8, 0.1, 100),
                                  Goal("accuracy", 0.9, 0.1, 100)], ids=str)
def test_cascade_on_real_proxy_scores_misses_in_at_most_delta_of_seeds(
        proxy: pd.DataFrame, messages: pd.DataFrame, goal: Goal) -> None:
    found, allowed = misses(regime(proxy, messages, goal)), misses_allowed(SEEDS, goal.delta)
    assert found <= allowed, f"{goal}: missed in {found} of {SEEDS} seeds (at most {allowed} allowed)"


def test_the_issues_recall_case_claims_no_more_than_it_delivers(
        proxy: pd.DataFrame, messages: pd.DataFrame) -> None:
    """41 refunds of 312, sample 40: the bound is the target, or 1 exactly when the correction saturated."""
    case = regime(proxy, messages, Goal("recall", 0.9, 0.1, 40))
    for seed in range(20):
        threshold, proxy_says = cascade_once(case, seed)
        recall = 1 - (proxy_says & case.good).sum() / case.good.sum()
        assert threshold.bound in (0.9, 1.0)  # the target, or 1 when every row went to the oracle
        assert threshold.bound < 1.0 or recall == 1.0  # a claimed 1 is exact


def test_evaluate_after_a_cascade_scores_the_delivered_answers(messages: pd.DataFrame, gw: Gateway, store: Path,
                                                               proxy: pd.DataFrame) -> None:
    """Issue 31's case: the team question, labels as oracle, target 0.9. `gwlab.evaluate` on the cascade's
    frame scores what it delivered; the cheap model alone is scored by naming its columns."""
    cascade = gwlab.Cascade(oracle=messages["team"], question="team", target=0.9, delta=0.1, sample=60)
    out = messages.gw.decide("{text}", ASKED, gateway=gw, progress=False, checkpoint=store, cascade=cascade)
    assert out.run.sent == 0  # the cheap model's answers come from the module's checkpoint
    delivered = (out["team__answer"] == messages["team"]).mean()
    cheap = (out["team__proxy__choice"] == messages["team"]).mean()
    assert (out["team__choice"] == out["team__answer"]).all()
    frame = out.assign(label=messages["team"])
    assert gwlab.evaluate(frame, truth="label", prob="team").metrics["accuracy"].iloc[0] == pytest.approx(delivered)
    alone = gwlab.evaluate(frame, truth="label", prob="team__proxy").metrics["accuracy"].iloc[0]
    assert alone == pytest.approx(cheap)
    assert delivered > cheap  # the oracle's rows lift what is delivered above the cheap model's own
