"""Every plot renders on the Agg backend, returns its Axes and draws the artists it promises."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.image import AxesImage

import gwlab.plots as plots
from gwlab.frames.evaluate import evaluate


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def answers() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(60, 3))
    p /= p.sum(axis=1, keepdims=True)
    return pd.DataFrame({
        "label": rng.choice(["a", "b", "c"], 60), "is_urgent": rng.uniform(size=60) < 0.5,
        "urgent__noul": rng.uniform(size=60),
        "team__choice": np.array(["a", "b", "c"])[p.argmax(axis=1)],
        "team__p__a": p[:, 0], "team__p__b": p[:, 1], "team__p__c": p[:, 2],
        "sev__score": p @ np.arange(3), "sev__p__0": p[:, 0], "sev__p__1": p[:, 1], "sev__p__2": p[:, 2],
    })


@pytest.fixture
def usage() -> pd.DataFrame:
    return pd.DataFrame({
        "time": 1_700_000_000 + np.arange(6) * 2.0, "method": "POST",
        "path": ["/v1/decisions"] * 4 + ["/v1/chat/completions"] * 2,
        "model": ["local/decide-e5-small"] * 4 + ["local/gemma-3-270m"] * 2,
        "status": [200, 200, 429, 200, 200, 200], "latency_ms": [12.0, 15.0, 3.0, 11.0, 900.0, 850.0],
        "input_tokens": [40, 42, 0, 41, 20, 22], "output_tokens": [0, 0, 0, 0, 8, 8],
        "run": ["a", "a", "a", "b", "b", "b"],
    })


def test_reliability_draws_the_diagonal_the_curve_and_the_count_bars(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent", bins=5)
    ax = plots.reliability(ev)
    assert len(ax.lines) == 2  # diagonal + observed
    twin = next(other for other in ax.figure.axes if other is not ax)
    assert len(twin.patches) == 5
    assert "ECE" in ax.get_title()


def test_reliability_accepts_an_existing_axes(answers: pd.DataFrame) -> None:
    _, given = plt.subplots()
    ev = evaluate(answers, truth="label", prob="team")
    assert plots.reliability(ev, "team", ax=given) is given


def test_probabilities_draws_one_box_per_option(answers: pd.DataFrame) -> None:
    ax = plots.probabilities(answers, "team")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert len(ax.lines) == 3 * 7  # per option: the box, 2 whiskers, 2 caps, the median, the fliers


def test_scores_draws_a_histogram_with_a_tick_per_level(answers: pd.DataFrame) -> None:
    ax = plots.scores(answers, "sev", bins=10)
    assert len(ax.patches) == 10
    assert list(ax.get_xticks()) == [0, 1, 2]


def test_confusion_draws_an_image_and_a_number_per_cell(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="label", prob="team")
    ax = plots.confusion(ev)
    assert any(isinstance(a, AxesImage) for a in ax.get_children())
    assert len(ax.texts) == 9
    assert sum(int(t.get_text()) for t in ax.texts) == 60


def test_usage_over_time_draws_a_line_per_model(usage: pd.DataFrame) -> None:
    ax = plots.usage_over_time(usage)
    assert sorted(line.get_label() for line in ax.lines) == ["local/decide-e5-small", "local/gemma-3-270m"]


def test_latency_histogram_marks_the_median(usage: pd.DataFrame) -> None:
    ax = plots.latency(usage, bins=7)
    assert len(ax.patches) == 7 and "median" in ax.get_legend().get_texts()[0].get_text()


def test_cost_per_run_draws_a_bar_per_run(usage: pd.DataFrame) -> None:
    prices = {"local/decide-e5-small": {"input": 1000.0, "output": 1000.0}, "local/gemma-3-270m": (1.0, 2.0)}
    ax = plots.cost_per_run(usage, prices)
    heights = [p.get_height() for p in ax.patches]
    # run a: 82 decision input tokens (the 429 bills nothing); run b: 41 decision tokens + chat 42 in, 16 out
    assert heights == pytest.approx([82 * 1000 / 1e6, 41 * 1000 / 1e6 + (42 * 1.0 + 16 * 2.0) / 1e6])
