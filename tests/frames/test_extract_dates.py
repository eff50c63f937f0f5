"""Date fields of `df.gw.extract` come back in the documented dtype, and `evaluate(kind="fields")` scores
dates by calendar day (issue 31, point 9 (b))."""

from __future__ import annotations

import datetime as dt
import warnings

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor
from gwlab.client.gateway import Gateway
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.extract import typed_columns
from gwlab.wire.schema import Schema


def _typed(schema: dict, answers: dict) -> pd.DataFrame:
    return typed_columns(pd.DataFrame(answers, dtype=object), Schema.of(schema))


def test_every_date_the_schema_accepts_is_a_naive_ns_timestamp_at_midnight() -> None:
    # all valid ISO dates for Python's date.fromisoformat, which validates them: the week date crashed the run
    out = _typed({"when": dt.date | None}, {"when": ["2026-01-15", "20260115", "2026-W03-4", None]})
    assert str(out["when"].dtype) == "datetime64[ns]"
    assert out["when"].tolist()[:3] == [pd.Timestamp("2026-01-15")] * 3 and pd.isna(out["when"].iloc[3])


def test_datetimes_keep_ns_and_become_utc_only_when_an_answer_carries_an_offset() -> None:
    naive = _typed({"at": dt.datetime}, {"at": ["2026-01-15T10:00:00", "2026-01-16T08:30:00"]})
    assert str(naive["at"].dtype) == "datetime64[ns]"
    zoned = _typed({"at": dt.datetime}, {"at": ["2026-01-15T10:00:00+02:00", "2026-01-16T08:30:00Z"]})
    assert str(zoned["at"].dtype) == "datetime64[ns, UTC]"
    assert zoned["at"].tolist() == [pd.Timestamp("2026-01-15T08:00Z"), pd.Timestamp("2026-01-16T08:30Z")]


def test_a_local_models_date_answer_arrives_as_datetime64_ns(gw: Gateway) -> None:
    frame = pd.DataFrame({"text": ["Ordered on 2026-01-15, it arrived broken."]})
    out = frame.gw.extract("When was it ordered? {text}", {"when": dt.date | None}, gateway=gw,
                           checkpoint=None, progress=False, max_tokens=24)
    assert out["__status"].iloc[0] == "sent" and str(out["when"].dtype) == "datetime64[ns]"


def test_dates_are_scored_by_calendar_day_whatever_the_columns_unit_or_zone() -> None:
    labels = pd.to_datetime(pd.Series(["2026-01-15", "2026-02-01", "2026-03-10", None]))  # naive, as users read
    utc = pd.to_datetime(pd.Series(["2026-01-15", "2026-02-02", "2026-03-10", None]), utc=True)
    micro = utc.dt.tz_localize(None).astype("datetime64[us]")
    timed = pd.Series([pd.Timestamp("2026-01-15T10:00"), pd.Timestamp("2026-02-01"), pd.NaT, pd.NaT])
    plain = pd.Series([dt.date(2026, 1, 15), dt.date(2026, 2, 1), dt.date(2026, 3, 11), None], dtype=object)
    frame = pd.DataFrame({"truth": labels, "utc": utc, "micro": micro, "timed": timed, "plain": plain})
    frame["__status"] = "sent"  # every row answered: its null is an answer, not a failed extraction
    right = {}
    for column in ("utc", "micro", "timed", "plain"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvaluationWarning)  # 4 rows: the small-sample warning
            table = gwlab.evaluate(frame, truth={"when": "truth"}, pred={"when": column}, kind="fields").metrics
        right[column] = int(table.loc["when", "right"])
    # by hand: utc and micro miss Feb 1 only; a time of day is not a date (10:00 is wrong, NaT vs a date
    # is missed); plain dates miss Mar 10; the null label meets a null answer in every column
    assert right == {"utc": 3, "micro": 3, "timed": 2, "plain": 3}


@pytest.mark.parametrize("value", [pd.Timestamp("2026-01-15T00:00+02:00"), "2026-01-15"])
def test_a_midnight_elsewhere_or_a_date_written_as_text_is_not_taken_for_the_day(value) -> None:
    frame = pd.DataFrame({"truth": [pd.Timestamp("2026-01-15")], "pred": pd.Series([value], dtype=object),
                          "__status": ["sent"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        table = gwlab.evaluate(frame, truth={"when": "truth"}, pred={"when": "pred"}, kind="fields").metrics
    assert table.loc["when", "right"] == 0  # compared exactly, as before: normalise such labels first
