"""A run summary keeps what every run has; what a pilot, the input limit, the checkpoint or batch jobs add
is a typed frozen part built where it is computed, with its own line, read by key as the dicts it replaced."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.parts import (
    BatchEstimate,
    BatchPilotEstimate,
    BatchSummary,
    CachedFrom,
    OverLimitReport,
    PilotEstimate,
)
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.task_batch import TaskPilotEstimate, TaskSummary


def _parts() -> dict[str, object]:
    return {"pilot": PilotEstimate(18, 18, 1200.0, 0.0, 0.0012),
            "over_limit": OverLimitReport("m", 512, 2, [5, 7], [700, 800]),
            "cached_from": CachedFrom("local:abc", 4, "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z"),
            "batch": BatchSummary("openai", ["batch_1"], 6, 6, {"completed": 6}, 0.5, 100, 20, 0, None,
                                  BatchEstimate(6, 120.0, 0.5))}


def test_no_field_of_a_run_summary_is_a_free_form_dict() -> None:
    loose = {f.name: f.type for f in dataclasses.fields(RunSummary) if "dict" in str(f.type)}
    assert loose == {}
    task_loose = {f.name: f.type for f in dataclasses.fields(TaskSummary) if "dict" in str(f.type)}
    assert task_loose == {}


@pytest.mark.parametrize("name", ["pilot", "over_limit", "cached_from", "batch"])
def test_each_part_is_frozen_and_read_by_key_as_the_dict_it_replaced(name: str) -> None:
    part = _parts()[name]
    names = [f.name for f in dataclasses.fields(part)]  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(part, names[0], None)
    assert dict(part) == {name: getattr(part, name) for name in names}  # type: ignore[call-overload]
    with pytest.raises(KeyError):
        part["nonsense"]  # type: ignore[index]


def test_the_frame_s_attrs_hold_every_part_as_plain_json_data() -> None:
    summary = RunSummary(rows=24, model="m", endpoint="/decisions", **_parts())  # type: ignore[arg-type]
    out = BatchFrame.wrap(pd.DataFrame({"a": [1]}), summary)
    plain = json.loads(json.dumps(out.attrs["gwlab_run"]))
    assert plain["pilot"]["rows"] == 18 and plain["over_limit"]["rows"] == [5, 7]
    assert plain["cached_from"]["answers"] == 4 and plain["batch"]["estimate"]["requests"] == 6


def test_each_part_says_its_own_line_in_the_summary() -> None:
    text = RunSummary(rows=24, model="m", endpoint="/decisions", **_parts()).text()  # type: ignore[arg-type]
    assert "over the input limit: 2 rows look longer than m's 512 tokens (rows 5, 7)" in text
    assert "cached: 4 answers given by local:abc between 2026-11-27T10:00:00Z and 2026-11-27T10:05:00Z" in text
    assert "pilot: the other 18 rows need 18 requests, about 1200 in / 0 out tokens, est. $0.0012" in text
    assert "batch (openai): 1 job(s), 6 requests submitted and 6 answers collected by this call" in text


def test_a_report_of_no_rows_over_the_limit_adds_no_line() -> None:
    quiet = RunSummary(model="m", over_limit=OverLimitReport("m", 512, 0, [], []))
    assert "input limit" not in quiet.text() and quiet.text() == RunSummary(model="m").text()


def test_a_batch_pilot_says_its_jobs_and_whether_they_pass_the_window() -> None:
    within = BatchPilotEstimate(6, 6, 60.0, 12.0, 0.01, 2, 30.0, 5.0, 86_400.0)
    past = dataclasses.replace(within, seconds=90_000.0)
    assert within["batch"] is True and "batch" not in PilotEstimate(1, 1, 1.0, 1.0, 0.0)
    assert within.text().endswith("at the batch price, in 2 job(s) taking about 30 s (window 86400 s)")
    assert "past the 86400 s window: expect expiry part-way" in past.text()


def test_a_task_pilot_is_typed_and_its_seconds_are_unknown_until_a_pilot_task_ends() -> None:
    pilot = TaskPilotEstimate(3, 0.75)
    assert math.isnan(pilot["seconds"]) and pilot.text().startswith("pilot: the other 3 tasks would cost about $0.7500")
    summary = TaskSummary(rows=5, family="images", model="m", pilot=dataclasses.replace(pilot, seconds=12.0))
    assert "take about 12 s one after another" in summary.text()
