"""`gwlab.estimate`: evaluate's argument conventions, labels through the one label reader, per-slice PPI++
figures equal to the numpy core's on the same rows, and the table's side-by-side columns."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.stats.ppi import ipw_mean, ppi_mean


def _frame(n: int = 600, labelled: int = 80, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.3
    p = np.clip(np.where(truth, 0.7, 0.25) + rng.normal(0, 0.12, n), 0, 1)
    label = np.where(truth, "Yes", "no").astype(object)  # as an analyst writes them: case differs
    label[labelled:] = None
    channel = np.where(rng.random(n) < 0.5, "mail", "chat")
    return pd.DataFrame({"refund__noul": p, "is_refund": label, "channel": channel, "truth": truth})


def test_estimate_of_a_noul_share_per_slice_equals_the_core_on_the_slice_rows() -> None:
    df = _frame()
    table = gwlab.estimate(df, truth="is_refund", prob="refund", by="channel")
    assert list(table["channel"]) == ["chat", "mail"] and set(table["answer"]) == {"true"}
    for _, row in table.iterrows():
        part = df[df.channel == row["channel"]]
        lab = part.is_refund.notna()
        y = (part.is_refund[lab] == "Yes").to_numpy(float)
        want = ppi_mean(y, part.refund__noul[lab].to_numpy(), part.refund__noul[~lab].to_numpy())
        assert row["estimate"] == pytest.approx(want.estimate) and row["low"] == pytest.approx(want.low)
        assert row["labelled_only"] == pytest.approx(y.mean())
        assert row["model_only"] == pytest.approx(part.refund__noul.mean())
        assert row["labelled"] == lab.sum() and row["rows"] == len(part)
        assert row["effective_labels"] > row["labelled"]  # a useful model is worth extra labels


def test_lambda_zero_gives_the_labelled_only_interval_and_one_plain_ppi() -> None:
    df = _frame()
    zero = gwlab.estimate(df, truth="is_refund", prob="refund", lam=0.0).iloc[0]
    assert (zero["estimate"], zero["low"]) == pytest.approx((zero["labelled_only"], zero["labelled_low"]))
    one = gwlab.estimate(df, truth="is_refund", prob="refund", lam=1.0).iloc[0]
    assert one["lam"] == 1.0


def test_a_choice_question_gets_one_row_per_option_and_predictions_work_alone() -> None:
    rng = np.random.default_rng(4)
    kinds = rng.choice(["refund", "bug", "praise"], 400, p=[0.3, 0.5, 0.2])
    pred = np.where(rng.random(400) < 0.8, kinds, "bug")
    label = pd.Series(kinds, dtype=object).str.upper()  # REFUND for refund: read by the label reader
    label[60:] = None
    df = pd.DataFrame({"kind__choice": pred, "label": label})
    table = gwlab.estimate(df, truth="label", pred="kind__choice")
    assert sorted(table["answer"]) == ["bug", "praise", "refund"]
    assert table["estimate"].sum() == pytest.approx(1.0, abs=0.05)  # lam tuned per option
    assert gwlab.estimate(df, truth="label", pred="kind__choice", lam=1.0)["estimate"].sum() == pytest.approx(1.0)
    refund = table.set_index("answer").loc["refund"]
    assert refund["low"] < (kinds == "refund").mean() < refund["high"]


def test_rows_without_a_model_answer_are_outside_the_population_and_counted() -> None:
    df = _frame()
    df.loc[df.index[100:130], "refund__noul"] = np.nan
    row = gwlab.estimate(df, truth="is_refund", prob="refund").iloc[0]
    assert row["missing"] == 30 and row["rows"] == 570


def test_cluster_column_widens_the_interval_and_warns_with_few_labelled_clusters() -> None:
    df = _frame()
    plain = gwlab.estimate(df, truth="is_refund", prob="refund").iloc[0]
    df["thread"] = np.arange(len(df)) // 20  # 30 threads; the 80 labels fall in 4
    with pytest.warns(EvaluationWarning, match="labelled clusters"):
        clustered = gwlab.estimate(df, truth="is_refund", prob="refund", cluster="thread").iloc[0]
    assert clustered["estimate"] == pytest.approx(plain["estimate"])
    assert clustered["high"] - clustered["low"] != pytest.approx(plain["high"] - plain["low"])


def test_label_prob_column_gives_the_inverse_probability_weighted_estimate() -> None:
    df = _frame(labelled=0)
    rng = np.random.default_rng(8)
    pi = np.clip(np.sqrt(df.refund__noul * (1 - df.refund__noul)) / 3, 0.01, 1)
    drawn = rng.random(len(df)) < pi
    df["is_refund"] = np.where(drawn, np.where(df.truth, "yes", "no"), None)
    df["pi"] = pi
    row = gwlab.estimate(df, truth="is_refund", prob="refund", label_prob="pi").iloc[0]
    y = np.where(drawn, df.truth.astype(float), np.nan)
    assert row["estimate"] == pytest.approx(ipw_mean(y, df.refund__noul.to_numpy(), pi.to_numpy()).estimate)


def test_bad_arguments_are_refused_naming_the_field() -> None:
    df = _frame()
    with pytest.raises(InvalidRequest, match="by"):
        gwlab.estimate(df, truth="is_refund", prob="refund", by="nope")
    with pytest.raises(InvalidRequest, match="lam"):
        gwlab.estimate(df, truth="is_refund", prob="refund", lam=2.0)
    with pytest.raises(InvalidRequest, match="truth"):
        gwlab.estimate(df, truth="nope", prob="refund")
    df["pi"] = 0.0
    with pytest.raises(InvalidRequest, match="label_prob"):
        gwlab.estimate(df, truth="is_refund", prob="refund", label_prob="pi")


def test_a_score_question_estimates_the_mean_level() -> None:
    rng = np.random.default_rng(6)
    level = rng.integers(0, 3, 300)
    p = np.eye(3)[level] * 0.6 + 0.4 / 3
    label = pd.Series(level + 1, dtype=object)  # a 1-based scale, read as the levels by the label reader
    label[50:] = None
    df = pd.DataFrame({f"s__p__{k}": p[:, k] for k in range(3)} | {"s__score": p @ np.arange(3), "lab": label})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        row = gwlab.estimate(df, truth="lab", prob="s", levels_from=1).iloc[0]
    assert row["answer"] == "mean" and row["low"] < level.mean() < row["high"]


def test_a_share_interval_stays_within_zero_and_one() -> None:
    df = _frame(n=200, labelled=6)
    table = gwlab.estimate(df, truth="is_refund", prob="refund", by="channel")
    bounds = table[["low", "high", "labelled_low", "labelled_high"]].to_numpy()
    assert np.nanmin(bounds) >= 0.0 and np.nanmax(bounds) <= 1.0


def test_the_labelled_only_share_of_active_labels_is_their_weighted_mean_inside_zero_one() -> None:
    df = _frame(n=400, labelled=0)
    df["pi"] = 0.05
    df.loc[df.index[:3], ["is_refund", "pi"]] = ["Yes", 0.005]  # three yes, each drawn at 0.005
    y = np.where(df.is_refund.notna(), 1.0, np.nan)
    assert ipw_mean(y, df.refund__noul.to_numpy(), df.pi.to_numpy(), lam=0.0).estimate == pytest.approx(1.5)
    with pytest.warns(EvaluationWarning, match="fewer than 10 labels"):
        row = gwlab.estimate(df, truth="is_refund", prob="refund", label_prob="pi").iloc[0]
    assert row["labelled_only"] == pytest.approx(1.0)  # every label says yes; sum(Y/pi)/N read 1.5


def test_a_share_with_few_labels_either_way_warns_and_enough_labels_do_not() -> None:
    rare = _frame(n=2000, labelled=60)
    rare["is_refund"] = np.where(np.arange(2000) < 57, "no", np.where(np.arange(2000) < 60, "Yes", None))
    with pytest.warns(EvaluationWarning, match=r"fewer than 10 labels with \(or without\) true"):
        gwlab.estimate(rare, truth="is_refund", prob="refund")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gwlab.estimate(_frame(labelled=200), truth="is_refund", prob="refund")
