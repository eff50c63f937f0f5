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
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.evaluate import evaluate
from tests.support.ledgers import live_ledger
from tests.support.models import DECIDE_MODEL, TEXT_MODEL


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


def test_cost_per_run_labels_a_run_of_unknown_price_instead_of_drawing_zero(usage: pd.DataFrame) -> None:
    usage = usage.assign(model=usage["model"].replace("local/gemma-3-270m", "vendor/unpriced"))
    ax = plots.cost_per_run(usage, {"local/decide-e5-small": {"input": 1000.0, "output": 1000.0}})
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == pytest.approx(82 * 1000 / 1e6) and heights[1] != heights[1]  # run b: NaN, no bar
    assert [t.get_text() for t in ax.texts] == ["cost unknown"]


# --- issue 18, item 9: figures that say what they show, and tolerate calls without a model -----------


@pytest.fixture
def ledger_with_a_models_call(usage: pd.DataFrame) -> pd.DataFrame:
    """The fixture's ledger after a gw.models() call first: no model, no tokens, no run."""
    models_call = {"time": 1_699_999_999.0, "method": "GET", "path": "/v1/models", "model": np.nan,
                   "status": 200, "latency_ms": 2.0, "input_tokens": np.nan, "output_tokens": np.nan,
                   "run": np.nan}
    return pd.concat([pd.DataFrame([models_call]), usage], ignore_index=True)


def _drawn(ax) -> None:
    ax.figure.canvas.draw()


def test_reliability_legend_sits_outside_the_axes_not_over_the_curve(answers: pd.DataFrame) -> None:
    ax = plots.reliability(evaluate(answers, truth="is_urgent", prob="urgent"))
    _drawn(ax)
    legend = ax.get_legend()
    assert not legend.get_window_extent().overlaps(ax.get_window_extent())
    assert [t.get_text() for t in legend.get_texts()] == ["perfectly calibrated", "observed", "95% interval",
                                                          "rows"]


def test_reliability_title_names_the_rows_and_bins_its_ece_is_over(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent", bins=5)
    ece = ev.metrics.loc["urgent", "ece"]
    assert plots.reliability(ev).get_title() == f"urgent: ECE {ece:.3f}\n(60 rows, 5 bins)"
    held_out = evaluate(answers.iloc[:25], truth="is_urgent", prob="urgent", bins=5)
    title = plots.reliability(held_out, label="held-out half, before").get_title()
    assert title.endswith("(held-out half, before, 25 rows, 5 bins)")


@pytest.mark.parametrize("question", ["urgent", "team"])
def test_reliability_rows_plots_only_the_selected_rows(answers: pd.DataFrame, question: str) -> None:
    """The bars, the curve and the ECE in the title are those of the selected rows, as if only they had
    been evaluated (the option used to change the title alone)."""
    truth = "is_urgent" if question == "urgent" else "label"
    held_out = np.arange(len(answers)) >= 35
    ax = plots.reliability(evaluate(answers, truth=truth, prob=question, bins=5), ax=None,
                           rows=held_out, label="held-out")
    alone = evaluate(answers[held_out], truth=truth, prob=question, bins=5)
    table = alone.reliability[question]
    twin = next(other for other in ax.figure.axes if other is not ax)
    assert [p.get_height() for p in twin.patches] == list(table["count"])
    used = table[table["count"] > 0]
    x, y = ax.lines[1].get_data()
    assert list(x) == pytest.approx(list(used["mean_prob"])) and list(y) == pytest.approx(list(used["observed"]))
    ece = alone.metrics.loc[question, "ece"]
    assert ax.get_title() == f"{question}: ECE {ece:.3f}\n(held-out, 25 rows, 5 bins)"


def test_reliability_rows_as_index_labels_or_a_series_select_the_same_rows(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent", bins=5)
    by_mask = plots.reliability(ev, rows=answers.index >= 35).get_title()
    assert plots.reliability(ev, rows=answers.index[35:]).get_title() == by_mask
    assert plots.reliability(ev, rows=pd.Series(answers.index >= 35, index=answers.index)).get_title() == by_mask


def test_reliability_rows_given_as_text_is_refused_naming_the_field(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent")
    with pytest.raises(InvalidRequest, match="rows") as info:
        plots.reliability(ev, rows="held-out")
    assert info.value.field == "rows" and "label=" in str(info.value)


def test_usage_over_time_shows_no_question_mark_for_a_call_without_a_model(
        ledger_with_a_models_call: pd.DataFrame) -> None:
    ax = plots.usage_over_time(ledger_with_a_models_call)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["local/decide-e5-small", "local/gemma-3-270m"]


def test_usage_over_time_labels_ticks_as_times_not_fractional_seconds(usage: pd.DataFrame) -> None:
    fast = usage.assign(time=pd.to_datetime(1_700_000_000 + np.linspace(0, 2, len(usage)), unit="s", utc=True))
    ax = plots.usage_over_time(fast)  # six calls in two seconds: the default formatter wrote 13:20.000000
    _drawn(ax)
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and not any("0000" in t for t in ticks)
    assert ax.xaxis.get_major_formatter().get_offset().startswith("2023-Nov-14 22:13")
    assert ax.get_xlabel() == "time (UTC)"


def test_every_usage_plot_draws_a_ledger_holding_a_models_call(ledger_with_a_models_call: pd.DataFrame) -> None:
    prices = {"local/decide-e5-small": (1000.0, 0.0), "local/gemma-3-270m": (1.0, 2.0)}
    assert len(plots.cost_per_run(ledger_with_a_models_call, prices).patches) == 3  # the models call: no run
    assert len(plots.latency(ledger_with_a_models_call, bins=5).patches) == 5
    assert len(plots.usage_over_time(ledger_with_a_models_call).lines) == 2


def test_every_usage_plot_draws_a_live_ledger_of_a_models_call_and_two_models(gateway) -> None:
    ledger = live_ledger(gateway)
    ax = plots.usage_over_time(ledger)
    _drawn(ax)
    assert sorted(line.get_label() for line in ax.lines) == sorted([DECIDE_MODEL, TEXT_MODEL])
    assert len(plots.cost_per_run(ledger).patches) >= 1
    assert len(plots.latency(ledger, bins=3).patches) == 3


def test_reliability_draws_each_bins_interval_behind_the_curve(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent", bins=5)
    ax = plots.reliability(ev)
    (bars,) = ax.collections
    used = ev.reliability["urgent"].query("count > 0")
    assert len(bars.get_segments()) == len(used)
    assert [seg[1][1] for seg in bars.get_segments()] == pytest.approx(list(used["observed_high"]))


def test_slices_draws_a_bar_per_slice_with_its_interval_and_marks_small_ones(answers: pd.DataFrame) -> None:
    frame = answers.assign(channel=["chat"] * 30 + ["mail"] * 25 + ["fax"] * 5)
    with pytest.warns(UserWarning, match="fewer than 10 rows"):
        ev = evaluate(frame, truth={"urgent": "is_urgent"}, by="channel")
    ax = plots.slices(ev, "kappa")
    (bars,) = [c for c in ax.collections if hasattr(c, "get_segments")]
    assert len(bars.get_segments()) == 3
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == ["chat (n=30)", "fax (n=5, small)", "mail (n=25)"]
    assert ax.get_legend() is not None


def test_slices_names_the_metric_it_cannot_draw(answers: pd.DataFrame) -> None:
    ev = evaluate(answers, truth="is_urgent", prob="urgent")
    with pytest.raises(plots.InvalidRequest) as raised:
        plots.slices(ev, "f1")
    assert raised.value.field == "metric"
