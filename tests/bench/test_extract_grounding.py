"""The grounding benchmark's scoring (bench/extract_grounding.py): pure, no gateway, no model."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from bench.extract_grounding import SCHEMAS, SETS, _verdict, field_counts
from gwlab.wire.grounding import EXACT, ground, kind_of
from gwlab.wire.schema import Schema

KINDS = {"order_id": "identifier", "amount": "amount", "date": "date", "name": "person_name"}


def test_the_benchs_fields_are_an_identifier_an_amount_a_date_and_a_persons_name():
    properties = Schema.of(SCHEMAS["written"]).json["properties"]
    assert {field: kind_of(prop, field) for field, prop in properties.items()} == KINDS


@pytest.mark.parametrize(("k", "n", "goal", "at_least", "verdict"), [
    (0, 190, 0.02, False, "shown"),  # the Wilson upper bound of 0/190 is 1.98 %
    (0, 161, 0.02, False, "not shown (the interval straddles it)"),  # 2.3 %
    (10, 100, 0.02, False, "missed"),
    (157, 187, 0.90, True, "missed"),  # [78 %, 88 %]
    (187, 206, 0.90, True, "not shown (the interval straddles it)"),
    (298, 300, 0.90, True, "shown"),
    (0, 0, 0.02, False, "no values"),
])
def test_a_goal_is_shown_only_when_its_whole_wilson_interval_is_on_its_side(k, n, goal, at_least, verdict):
    assert _verdict(k, n, goal, at_least) == verdict


def test_values_are_counted_right_invented_or_wrong_and_caught_when_not_found_or_misplaced():
    truth = pd.DataFrame({"text": ["Order CYC-1 paid", "no order here", "order CYC-2", "one bike, 18 euros"],
                          "order_id": ["CYC-1", None, "CYC-2", None]})
    out = pd.DataFrame({"__status": ["ok", "ok", "ok", "ok"], "order_id": ["cyc 1", "CYC-9", "CYC-3", "18"],
                        "order_id__grounding": ["exact", "not_found", "not_found", "misplaced"]})
    counts = field_counts(out, truth, "order_id", month_day=False)
    assert counts == {"given": 4, "right": 1, "invented": 2, "wrong": 1, "invented_caught": 2, "right_flagged": 0,
                      "wrong_caught": 1, "invented_misplaced": 1, "right_misplaced": 0}


@pytest.mark.parametrize("name", ["written", "written2", "written3"])
def test_every_label_of_the_written_sets_is_written_exactly_in_its_text_as_its_fields_kind(name):
    frame = SETS[name]()
    for _, row in frame.iterrows():
        for field, kind in KINDS.items():
            label = row[field]
            if label is None or (isinstance(label, float) and pd.isna(label)):
                continue
            value = dt.date.fromisoformat(label) if field == "date" else label
            found = ground(value, row["text"], kind)
            assert found is not None and found.status == EXACT, (row.name, field, label)
