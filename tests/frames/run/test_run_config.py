"""A run's options are one frozen object: one set of defaults and one check, for rows, tasks and Dask."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from gwlab import InvalidRequest
from gwlab.frames.accessor import GatewayAccessor
from gwlab.frames.dask.partitions import DaskExtractOptions, DaskOptions
from gwlab.frames.run.config import (
    DEFAULTS,
    EXTRACT_OPTIONS_DOC,
    GROUPS,
    OPTION_GROUP,
    RUN_OPTIONS_DOC,
    UNGROUPED,
    ExtractOptions,
    Output,
    RunConfig,
    RunOptions,
    TaskOptions,
)
from gwlab.frames.specs import EXTRACT_OWN, ExtractSpec


def _value(config: RunConfig, option: str) -> object:
    """An option's value, read in its group (or on the config, for the ungrouped ones)."""
    return getattr(getattr(config, OPTION_GROUP[option]), option) if option in OPTION_GROUP else getattr(config, option)


def test_each_kind_takes_its_defaults_from_the_one_table() -> None:
    for kind, defaults in DEFAULTS.items():
        config = RunConfig.of(kind, {})
        assert {name: _value(config, name) for name in defaults} == defaults


def test_a_config_and_each_of_its_groups_are_frozen() -> None:
    config = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.limits = config.limits  # type: ignore[misc]
    for group in GROUPS:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(getattr(config, group), dataclasses.fields(getattr(config, group))[0].name, None)


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


# --- the options declared once: the typed keywords and the docs' tables follow RunConfig (issue 32) ----------


def _documented_names(doc: str) -> set[str]:
    """The option names a numpydoc parameter table lists (`name : type` and `a, b : type` lines)."""
    names = set()
    for line in doc.splitlines():
        head, colon, _ = line.strip().partition(" : ")
        if colon and line.startswith(" " * 4) and not line.startswith(" " * 9):
            names |= {name.strip() for name in head.split(",")}
    return names


def test_the_typed_row_and_task_options_are_the_config_s_own() -> None:
    assert set(RunOptions.__annotations__) == RunConfig.options("rows")
    assert set(TaskOptions.__annotations__) == RunConfig.options("tasks")
    assert set(ExtractOptions.__annotations__) == RunConfig.options("rows") | set(EXTRACT_OWN)


def test_extract_s_own_keywords_are_fields_of_its_spec_typed_and_documented_once() -> None:
    assert set(EXTRACT_OWN) <= {f.name for f in dataclasses.fields(ExtractSpec)}
    assert not set(EXTRACT_OWN) & (set(OPTION_GROUP) | set(UNGROUPED))
    assert _documented_names("\n".join("    " + line.strip() if line.startswith("        ") and not
                                        line.startswith("            ") else line
                                        for line in EXTRACT_OPTIONS_DOC.splitlines())) == set(EXTRACT_OWN)
    dask_own = set(DaskExtractOptions.__annotations__) - set(DaskOptions.__annotations__)
    assert dask_own <= set(EXTRACT_OWN)


def test_the_door_splits_a_method_s_own_keywords_from_the_run_s_without_touching_the_caller_s() -> None:
    options = {"max_reasks": 2, "concurrency": 3, "grounding": "off"}
    own, config = RunConfig.split("rows", options, EXTRACT_OWN)
    assert own == {"max_reasks": 2, "grounding": "off"} and config.limits.concurrency == 3
    assert options == {"max_reasks": 2, "concurrency": 3, "grounding": "off"}  # nothing popped
    with pytest.raises(TypeError, match="levels"):
        RunConfig.split("rows", {"levels": 3}, EXTRACT_OWN)


def test_the_dask_options_the_config_knows_are_ones_a_dask_run_takes() -> None:
    assert set(DaskOptions.__annotations__) & (set(OPTION_GROUP) | set(UNGROUPED)) <= RunConfig.options("dask")


def test_the_docs_tables_list_every_option_a_run_takes() -> None:
    assert _documented_names(RUN_OPTIONS_DOC) == RunConfig.options("rows")
    assert RunConfig.options("tasks") <= _documented_names(GatewayAccessor.tasks.__doc__ or "")


def test_the_tie_sees_an_option_missing_from_the_docs() -> None:
    """The check itself: a table without `pilot` is caught."""
    without = "\n".join(line for line in RUN_OPTIONS_DOC.splitlines() if not line.strip().startswith("pilot"))
    assert RunConfig.options("rows") - _documented_names(without) == {"pilot"}


def test_the_dask_functions_document_every_dask_option() -> None:
    from gwlab.frames.dask.calls import _SHARED_DOC

    names = set()
    for line in _SHARED_DOC.splitlines():
        if line.startswith(" " * 4) and not line.startswith(" " * 5):
            names |= {name.strip() for name in line.strip().partition(" : ")[0].split(",")}
    assert set(DaskOptions.__annotations__) <= names


# --- the options grouped by concept: each option in one group, the groups and the flat keywords tied ------------


def test_every_option_a_run_takes_is_in_exactly_one_group_or_stands_alone() -> None:
    grouped = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(grouped) == len(set(grouped)) and not set(grouped) & set(UNGROUPED)
    assert {f.name for f in dataclasses.fields(RunConfig)} == {"kind", *GROUPS, *UNGROUPED}
    for kind in ("rows", "tasks", "dask"):
        assert RunConfig.options(kind) <= set(OPTION_GROUP) | set(UNGROUPED)
    assert set(OPTION_GROUP) | set(UNGROUPED) == RunConfig.options("rows") | RunConfig.options("tasks")


def test_the_flat_keywords_land_in_their_groups() -> None:
    options = {"concurrency": 3, "requests_per_minute": 60.0, "budget": 500, "pilot": 2, "checkpoint": None,
               "refresh": True, "errors": "coerce", "blank": "send", "join": False, "prefix": "a_", "progress": False,
               "repeats": 2}
    config = RunConfig.of("rows", options)
    assert {name: _value(config, name) for name in options} == options
    assert config.limits.concurrency == 3 and config.spending.budget == 500 and config.output.prefix == "a_"
    tasks = RunConfig.of("tasks", {"folder": "out", "poll_interval": 0.5, "timeout": 30.0})
    assert (tasks.polling.folder, tasks.polling.poll_interval, tasks.polling.timeout) == ("out", 0.5, 30.0)


def test_but_changes_options_by_their_flat_names_or_whole_groups_and_checks_again() -> None:
    config = RunConfig.of("rows", {"prefix": "a_", "budget": 9, "concurrency": 5})
    changed = config.but(join=False, prefix="", pilot=None, budget=None)
    assert changed.output == Output(join=False, prefix="", progress=True) and changed.spending.budget is None
    assert changed.limits == config.limits and config.output.prefix == "a_"  # the original is untouched
    assert config.but(output=Output(join=False)).output.join is False
    with pytest.raises(InvalidRequest) as refused:
        config.but(concurrency=0)
    assert refused.value.field == "concurrency"
    with pytest.raises(TypeError, match="nonsense"):
        config.but(nonsense=1)


def test_a_group_left_at_none_takes_its_kind_s_default_again_after_a_change() -> None:
    assert RunConfig.of("dask", {}).but(errors=None).failures.errors == "coerce"
    assert RunConfig.of("tasks", {}).but(concurrency=None, kind="rows").limits.concurrency == 16  # rows' own
    assert RunConfig.of("tasks", {}).but(kind="rows").limits.concurrency == 4  # a value set is kept
