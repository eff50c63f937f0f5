"""One label reader (issue 31 point 3): evaluate (prob and pred), compare (frames and Series) and field
scoring read labels and predictions alike, whatever type they are written in, or name the column.

The properties run over every pair of writings of yes/no (bool, 0/1, 0.0/1.0, "yes"/"no", "Yes"/"No",
"true"/"false", "TRUE"/"FALSE", " y "/" n "): the accuracy equals the one counted by hand on the
booleans, or the error names the label column.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gwlab
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning

WRITINGS = {
    "bool": (True, False), "int": (1, 0), "float": (1.0, 0.0), "yes": ("yes", "no"), "Yes": ("Yes", "No"),
    "true": ("true", "false"), "TRUE": ("TRUE", "FALSE"), "y": (" y ", " n "),
}
# (yes, no, a value that is neither): 1/2 codings and a code 2 for "unsure" are not readable as yes/no
CODES = {"1/2": (2, 1, 2), "0/1/2": (1, 0, 2), "text 2": ("2", "1", "2")}
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _written(values: np.ndarray, writing: str) -> list:
    yes, no = WRITINGS[writing]
    return [yes if v else no for v in values]


@st.composite
def _rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(12, 40))
    truth = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    pred = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return truth, pred


@given(_rows(), st.sampled_from(sorted(WRITINGS)), st.sampled_from(sorted(WRITINGS)))
@SETTINGS
def test_pred_accuracy_is_the_hand_count_whatever_both_sides_are_written_as(rows, label_writing, pred_writing):
    truth, pred = rows
    frame = pd.DataFrame({"label": _written(truth, label_writing), "pred": _written(pred, pred_writing)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)  # the small-sample flag
        ev = gwlab.evaluate(frame, truth="label", pred="pred", resamples=20)
    assert ev.metrics["accuracy"].iloc[0] == pytest.approx(np.mean(truth == pred))
    assert ev.metrics["n"].iloc[0] == len(truth) and ev.metrics["n_unmatched"].iloc[0] == 0


@given(_rows(), st.sampled_from(sorted(WRITINGS)), st.data())
@SETTINGS
def test_prob_accuracy_is_the_hand_count_whatever_the_labels_are_written_as(rows, writing, data):
    truth, _ = rows
    p = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(truth), max_size=len(truth))))
    frame = pd.DataFrame({"label": _written(truth, writing), "q__noul": p})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        ev = gwlab.evaluate(frame, truth="label", prob="q", resamples=20)
    # the predicted class is the likelier of [1 - p, p], a tie going to the first ("false")
    assert ev.metrics["accuracy"].iloc[0] == pytest.approx(np.mean(truth == (p > 1 - p)))


@given(_rows(), st.sampled_from(sorted(WRITINGS)), st.sampled_from(sorted(WRITINGS)))
@SETTINGS
def test_compare_of_prediction_series_reads_them_as_evaluate_does(rows, label_writing, pred_writing):
    truth, pred = rows
    index = pd.RangeIndex(len(truth))
    labels = pd.Series(_written(truth, label_writing), index=index, name="label")
    a = pd.Series(_written(pred, pred_writing), index=index, name="q")
    b = pd.Series(_written(~pred, pred_writing), index=index, name="q")  # the exact opposite
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        table = gwlab.compare(a, b, truth=labels, resamples=50).table
    accuracy = table.xs("accuracy", level="metric").iloc[0]
    assert accuracy["a"] == pytest.approx(np.mean(truth == pred))
    assert accuracy["b"] == pytest.approx(np.mean(truth != pred))


@given(_rows(), st.sampled_from(sorted(CODES)), st.sampled_from(["prob", "pred"]))
@SETTINGS
def test_a_coding_that_is_not_yes_no_is_refused_naming_the_column_and_values(rows, coding, how):
    truth, pred = rows
    codes = CODES[coding]
    labels = [codes[0] if t else codes[1] for t in truth]
    labels[0] = codes[2]  # at least one value that is not 0/1
    frame = pd.DataFrame({"my_labels": labels, "q__noul": pred.astype(float), "pred": pred})
    options = {"prob": "q"} if how == "prob" else {"pred": "pred"}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", EvaluationWarning)
        try:
            gwlab.evaluate(frame, truth="my_labels", resamples=20, **options)
        except InvalidRequest as error:
            assert "my_labels" in str(error) and repr(codes[2]) in str(error)
            return
    named = [str(w.message) for w in said if "my_labels" in str(w.message) and repr(codes[2]) in str(w.message)]
    assert named, "a label that is not yes/no was read silently"


def test_bool_predictions_against_01_labels_score_their_accuracy_not_zero():
    """The issue's finding: 85 % right predictions, bool against 0/1, scored 0.000 with no warning."""
    truth = np.array([1] * 10 + [0] * 10)
    pred = np.array([True] * 8 + [False] * 2 + [False] * 9 + [True])
    frame = pd.DataFrame({"label": truth, "pred": pred})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        assert gwlab.evaluate(frame, truth="label", pred="pred")["pred"]["accuracy"] == pytest.approx(0.85)


def test_compare_tells_a_model_from_its_exact_opposite_across_label_types():
    """The issue's finding: an 89 %-accurate model against its opposite was 'no significant difference'."""
    rng = np.random.default_rng(3)
    truth = rng.random(100) < 0.5
    pred = np.where(rng.random(100) < 0.89, truth, ~truth)
    labels = pd.Series(np.where(truth, "yes", "no"), name="label")
    comparison = gwlab.compare(pd.Series(pred, name="q"), pd.Series(~pred, name="q"), truth=labels)
    assert "A is more accurate" in comparison.verdict


def test_a_12_coding_is_refused_and_read_right_once_mapped():
    """The issue's finding: 1 = no, 2 = yes read as all true (0.41 instead of 0.89)."""
    truth = np.array([True] * 9 + [False] * 11)
    p = np.where(truth, 0.9, 0.1)
    p[:2] = 0.2  # two wrong
    frame = pd.DataFrame({"coded": np.where(truth, 2, 1), "q__noul": p})
    with pytest.raises(InvalidRequest, match="coded") as caught:
        gwlab.evaluate(frame, truth="coded", prob="q")
    assert caught.value.field == "truth" and "1, 2" in str(caught.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        ev = gwlab.evaluate(frame, truth="coded", prob="q", labels={1: False, 2: True})
    assert ev["q"]["accuracy"] == pytest.approx(18 / 20)


def test_an_unsure_code_mapped_to_none_is_left_out_as_unlabelled():
    frame = pd.DataFrame({"coded": [2, 1, 3, 2, 1] * 4, "q__noul": [0.9, 0.1, 0.5, 0.8, 0.3] * 4})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        row = gwlab.evaluate(frame, truth="coded", prob="q", labels={1: False, 2: True, 3: None})["q"]
    assert (row["n"], row["n_missing"], row["accuracy"]) == (16, 4, 1.0)


def test_synonym_keys_are_read_by_type_so_true_is_never_the_number_one():
    frame = pd.DataFrame({"label": [True, False, 1, 0] * 5, "q__noul": [0.9, 0.1, 0.1, 0.9] * 5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        row = gwlab.evaluate(frame, truth="label", prob="q", labels={1: False, 0: True})["q"]
    assert row["accuracy"] == 1.0  # bools as written, the numbers swapped by the mapping


def test_option_labels_and_predictions_meet_by_case_and_spaces_and_strays_are_named():
    questions = {"team": {"type": "choice", "criteria": {"billing": "", "tech": ""}}}
    frame = pd.DataFrame({"label": ["Billing", " tech ", "billing", "finance"] * 5,
                          "team__choice": ["billing", "TECH", "Billing ", "billing"] * 5})
    with pytest.warns(EvaluationWarning) as said:
        row = gwlab.evaluate(frame, truth="label", pred="team__choice", questions=questions)["team"]
    assert (row["n"], row["n_unmatched"], row["accuracy"]) == (15, 5, 1.0)
    assert any("'label'" in str(w.message) and "'finance'" in str(w.message) for w in said)


def test_a_prediction_outside_the_options_is_counted_wrong_and_warned_naming_its_column():
    questions = {"team": {"type": "choice", "criteria": {"billing": "", "tech": ""}}}
    frame = pd.DataFrame({"label": ["billing", "tech"] * 6, "team__choice": ["billing", "sales"] * 6})
    with pytest.warns(EvaluationWarning, match="team__choice.*'sales'"):
        row = gwlab.evaluate(frame, truth="label", pred="team__choice", questions=questions)["team"]
    assert row["accuracy"] == 0.5


@pytest.mark.parametrize(("value", "read"), [
    (True, True), (np.bool_(False), False), (1, True), (0.0, False), (np.int64(1), True), (" Yes ", True),
    ("FALSE", False), ("n", False), (2, None), (0.7, None), ("unsure", None), (None, None), (float("nan"), None)])
def test_boolean_reads_only_what_is_unambiguous(value, read):
    from gwlab.frames.evaluation.labels import boolean
    assert boolean(value) is read


def test_an_unknown_question_in_truth_is_named_as_truth_not_prob():
    frame = pd.DataFrame({"label": [True, False] * 6, "urgent__noul": [0.8, 0.2] * 6})
    with pytest.raises(InvalidRequest) as caught:
        gwlab.evaluate(frame, truth={"urgnet": "label"})
    assert caught.value.field == "truth" and "'urgnet'" in str(caught.value) and "urgent" in str(caught.value)


def test_recalibration_reads_the_labels_as_the_evaluation_mapped_them():
    rng = np.random.default_rng(1)
    truth = rng.random(200) < 0.4
    p = np.clip(np.where(truth, 0.7, 0.3) + rng.normal(0, 0.15, 200), 0.01, 0.99)
    frame = pd.DataFrame({"coded": np.where(truth, 2, 1), "q__noul": p})
    ev = gwlab.evaluate(frame, truth="coded", prob="q", labels={1: False, 2: True}, resamples=20)
    fitted = ev.recalibrate("temperature")["q"]
    assert fitted is not None and ev.frame is frame  # the frame as given, the labels read as mapped
