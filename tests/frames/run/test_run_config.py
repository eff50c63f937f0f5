"""A run's options are one frozen object: one set of defaults and one check, for rows, tasks and Dask."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from gwlab import InvalidRequest
from gwlab.frames.run.config import DEFAULTS, RunConfig


def test_each_kind_takes_its_defaults_from_the_one_table() -> None:
    for kind, defaults in DEFAULTS.items():
        config = RunConfig.of(kind, {})
        assert {name: getattr(config, name) for name in defaults} == defaults


def test_a_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunConfig().concurrency = 3  # type: ignore[misc]


@pytest.mark.parametrize("kind", ["rows", "tasks", "dask"])
@pytest.mark.parametrize(("option", "value"), [("errors", "ignore"), ("concurrency", 0), ("concurrency", True),
                                               ("pilot", 0), ("requests_per_minute", -1), ("prefix", 3)])
def test_a_bad_option_is_refused_naming_it_whichever_runner_takes_it(kind, option, value) -> None:
    with pytest.raises(InvalidRequest) as refused:
        RunConfig.of(kind, {option: value})
    assert refused.value.field == option


@pytest.mark.parametrize(("kind", "option"), [("tasks", "repeats"), ("rows", "poll_interval"), ("rows", "folder"),
                                              ("tasks", "tokens_per_minute"), ("rows", "nonsense")])
def test_an_option_the_runner_does_not_take_is_a_type_error_naming_it(kind, option) -> None:
    with pytest.raises(TypeError, match=option):
        RunConfig.of(kind, {option: 1})


def test_df_gw_rows_and_tasks_refuse_a_bad_option_before_sending_anything() -> None:
    frame = pd.DataFrame({"q": ["a"]})

    def never(*_: object) -> None:
        raise AssertionError("nothing may be sent")

    from gwlab.frames._client import Connection

    with pytest.raises(InvalidRequest) as refused:
        frame.gw.decide("{q}", {"x": {"type": "noul", "instructions": "x?"}}, gateway=Connection(never),
                        concurrency=0, checkpoint=None)
    assert refused.value.field == "concurrency"
    with pytest.raises(InvalidRequest) as refused:
        frame.gw.images("{q}", poll_interval=0, checkpoint=None)
    assert refused.value.field == "poll_interval"
