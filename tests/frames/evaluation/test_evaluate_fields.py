"""gwlab.evaluate(kind="fields"): extracted columns against label columns (issue 24 point 5).

Intervals are checked against statsmodels' Wilson interval on the same counts.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

import gwlab
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from tests.support.extract import KEY, SCHEMA, stub_server

# 12 rows: order is an optional number, product a label; truths and extracted values side by side
TRUE_ORDER = [1, 2, None, None, None, 6, 7, None, 9, 10, None, 12]
PRED_ORDER = [1, 2, None, 44, None, None, 7, 55, 90, 10, None, 12]  # 2 invented, 1 missed, 1 wrong
TRUE_PRODUCT = ["kettle", None, "lamp", "kettle", None, "lamp", "lamp", None, "kettle", "lamp", None, None]
PRED_PRODUCT = ["kettle", None, "lamp", "lamp", "lamp", "lamp", "lamp", None, "kettle", None, None, None]


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"true_order": pd.array(TRUE_ORDER, dtype="Int64"),
                         "order": pd.array(PRED_ORDER, dtype="Int64"), "true_product": TRUE_PRODUCT,
                         "product": pd.array(PRED_PRODUCT, dtype="string"), "__status": "sent"})


def _fields(frame: pd.DataFrame, **options) -> pd.DataFrame:
    truth = {"order": "true_order", "product": "true_product"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        return gwlab.evaluate(frame, truth=truth, kind="fields", **options).metrics


def test_each_field_counts_right_invented_missed_and_wrong_with_null_as_an_answer():
    table = _fields(_frame())
    counts = ["n", "truth_null", "right", "invented", "missed", "wrong"]
    assert table.loc["order", counts].tolist() == [12, 5, 8, 2, 1, 1]
    assert table.loc["product", ["right", "invented", "missed", "wrong"]].tolist() == [9, 1, 1, 1]
    assert table.loc["order", "accuracy"] == pytest.approx(8 / 12)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_each_fields_accuracy_interval_is_statsmodels_wilson(level):
    table = _fields(_frame(), level=level)
    for field, right in (("order", 8), ("product", 9)):
        low, high = proportion_confint(right, 12, alpha=1 - level, method="wilson")
        assert table.loc[field, "accuracy_low"] == pytest.approx(low, abs=1e-9)
        assert table.loc[field, "accuracy_high"] == pytest.approx(high, abs=1e-9)


def test_mae_is_over_rows_where_both_are_numbers_and_only_for_numeric_fields():
    table = _fields(_frame())
    assert table.loc["order", "mae"] == pytest.approx((0 + 0 + 0 + 81 + 0 + 0) / 6)
    assert np.isnan(table.loc["product", "mae"])


def test_all_right_has_accuracy_one_and_statsmodels_wilson_below_one():
    frame = pd.DataFrame({"true_order": [3, 4, 5], "order": pd.array([3, 4, 5], dtype="Int64"),
                          "true_product": ["a", "b", "c"], "product": ["a", "b", "c"]})
    table = _fields(frame)
    low, high = proportion_confint(3, 3, method="wilson")
    assert table.loc["order", "accuracy"] == 1 and table.loc["order", "small"]
    assert table.loc["order", ["accuracy_low", "accuracy_high"]].tolist() == pytest.approx([low, high])
    assert table.loc["order", "mae"] == 0


def test_all_null_labels_and_answers_are_all_right_with_nothing_invented_and_no_mae():
    frame = pd.DataFrame({"true_order": [None] * 4, "order": pd.array([None] * 4, dtype="Int64"),
                          "true_product": [None] * 4, "product": pd.array([None] * 4, dtype="string"),
                          "__status": "cached"})
    table = _fields(frame)
    assert table.loc["order", ["right", "truth_null", "invented", "missed", "wrong"]].tolist() == [4, 4, 0, 0, 0]
    assert np.isnan(table.loc["order", "mae"])


def test_a_small_sample_is_flagged_and_warned_of():
    with pytest.warns(EvaluationWarning, match="fewer than"):
        gwlab.evaluate(_frame().head(3), truth={"order": "true_order"}, kind="fields")


def test_rows_whose_extraction_failed_are_left_out_and_counted_missing():
    frame = _frame().assign(__status=["sent", "error", *["cached"] * 9, "not_run"])
    table = _fields(frame)
    assert table.loc["order", ["n", "n_missing", "right"]].tolist() == [10, 2, 6]


@pytest.mark.parametrize(("options", "field"), [
    ({"pred": {"order": "nope"}}, "pred"), ({"pred": {"other": "order"}}, "pred"),
    ({"prob": "order"}, "prob"), ({"by": "order"}, "by"), ({"kind": "field"}, "kind")])
def test_a_bad_fields_evaluation_is_refused_naming_the_argument(options, field):
    with pytest.raises(InvalidRequest) as caught:
        gwlab.evaluate(_frame(), truth={"order": "true_order"}, **{"kind": "fields", **options})
    assert caught.value.field == field


def test_an_extract_run_joined_to_its_labels_is_scored():
    frame = pd.DataFrame({"text": ["good", "never", "good"], "true_order": [42, 7, None]})
    with stub_server() as url, gwlab.Gateway(url, KEY) as gw:
        out = frame.gw.extract("{text}", SCHEMA, gateway=gw, max_tokens=64, max_reasks=0, checkpoint=None,
                               progress=False)
    table = _fields(out.assign(true_product="kettle"), pred={"order": "order", "product": "product"})
    assert table.loc["order", ["n", "n_missing", "right", "invented"]].tolist() == [2, 1, 1, 1]
    assert table.loc["product", "right"] == 2


def test_the_status_column_is_found_under_the_extracts_prefix():
    """Issue 31 (a): with prefix="g_" the status is `g___status`; never-sent rows were scored as right nulls."""
    frame = _frame().drop(columns="__status").rename(columns={"order": "g_order", "product": "g_product"})
    frame["g___status"] = ["sent", "error", *["cached"] * 9, "not_run"]
    table = _fields(frame, pred={"order": "g_order", "product": "g_product"})
    assert table.loc["order", ["n", "n_missing", "right"]].tolist() == [10, 2, 6]


def test_each_field_takes_the_status_of_its_own_extract():
    frame = _frame().drop(columns="__status").rename(columns={"product": "b_product"})
    frame["__status"], frame["b___status"] = "sent", ["error", *["sent"] * 11]
    table = _fields(frame, pred={"order": "order", "product": "b_product"})
    assert table.loc["order", "n_missing"] == 0 and table.loc["product", "n_missing"] == 1


def test_without_a_status_column_rows_with_no_value_at_all_are_refused_naming_pred():
    """Issue 31: a failed extraction (all values null) was counted as correct "absent" answers."""
    with pytest.raises(InvalidRequest, match="__status") as caught:
        _fields(_frame().drop(columns="__status"))
    assert caught.value.field == "pred"
    answered = _frame().drop(columns="__status").iloc[[0, 3, 5, 6, 8]]  # every row has some value
    assert _fields(answered).loc["order", "n"] == 5


def test_yes_no_text_and_number_labels_meet_the_extracted_values_by_the_label_reader():
    frame = pd.DataFrame({"refund": [True, False, True, False, True, None],
                          "t_refund": ["yes", 0, "TRUE", "No", 2, None],
                          "name": ["Acme  Corp", "bolt", "x", "y", "z", None],
                          "t_name": ["acme corp", "Bolt ", "x", "q", "z", None],
                          "qty": [3, 4, 5, 6, 7, None], "t_qty": ["3", 4.0, 5, "six", 7, None], "__status": "sent"})
    truth = {"refund": "t_refund", "name": "t_name", "qty": "t_qty"}
    with pytest.warns(EvaluationWarning, match="'t_refund': 2 cannot be read as yes/no"):
        table = gwlab.evaluate(frame, truth=truth, kind="fields").metrics
    assert table["right"].tolist() == [5, 5, 5]


def test_labels_synonyms_apply_to_field_labels():
    frame = pd.DataFrame({"refund": [True, False] * 6, "t_refund": [2, 1] * 6, "__status": "sent"})
    table = gwlab.evaluate(frame, truth={"refund": "t_refund"}, kind="fields", labels={1: False, 2: True}).metrics
    assert table.loc["refund", "accuracy"] == 1.0


def test_field_scoring_is_its_own_function_and_evaluate_kind_fields_is_the_same_call() -> None:
    """Two functions, two return types (issue 32 point 3): `evaluate_fields` returns a FieldEvaluation;
    `evaluate(kind="fields")`, kept for code written before it, gives the same table."""
    from gwlab.frames.evaluation.fields import FieldEvaluation

    truth = {"order": "true_order", "product": "true_product"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        own = gwlab.evaluate_fields(_frame(), truth, level=0.9)
        alias = gwlab.evaluate(_frame(), truth=truth, kind="fields", level=0.9)
    assert isinstance(own, FieldEvaluation) and isinstance(alias, FieldEvaluation)
    pd.testing.assert_frame_equal(own.metrics, alias.metrics)
    with pytest.raises(InvalidRequest) as refused:
        gwlab.evaluate_fields(_frame(), truth, pred={"order": "order"})
    assert refused.value.field == "pred"
