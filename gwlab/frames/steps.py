"""What every `df.gw` method does below its face (accessor.py): render the rows, check them and the
column names, send them through the runner (or a task batch), record the run, and wrap the answers on
the caller's index, positionally, so MultiIndex and duplicate labels keep their rows."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InputLimitWarning, InvalidRequest, RepeatsWarning
from gwlab.frames import _client
from gwlab.frames import columns as tidy
from gwlab.frames.batch import run as batch_run
from gwlab.frames.evaluation import repeats
from gwlab.frames.extract import typed_columns
from gwlab.frames.grounding.columns import GroundingMode, GroundingPlan
from gwlab.frames.recipes import META_COLUMNS, RowRecipe
from gwlab.frames.run import records
from gwlab.frames.run.budget import BYTES_PER_TOKEN, OverLimit, over_limit
from gwlab.frames.run.config import BLANK_DEFAULT, RunConfig
from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.run.runner import Batch, Runner
from gwlab.frames.store.stores import open_for_run
from gwlab.frames.task_batch import COLUMNS as TASK_COLUMNS
from gwlab.frames.task_batch import TaskFrame, TaskRun
from gwlab.frames.templates import Rows, Template, json_value
from gwlab.wire.jobs.tasks import TaskFamily
from gwlab.wire.schema import Schema

__all__ = ["TemplateSpec", "check_names", "grounding_note", "grounding_plan", "labels", "over_limit_rows",
           "over_limit_text", "prompts", "run_rows", "run_tasks", "typed_and_grounded", "warn_deterministic_repeats",
           "wrap", "wrap_repeats"]

TemplateSpec = str | Sequence[str] | Mapping[str, str]


async def run_tasks(frame: pd.DataFrame, family: TaskFamily, model: str, prompt: TemplateSpec,
                    build: Callable[[str], dict[str, Any]], config: RunConfig) -> TaskFrame:
    """A task batch over the frame's rows: each row's body built by `build`, submitted, polled, downloaded
    (`config`: a "tasks" run's, built at the accessor's door)."""
    rows = Template.parse(prompt, frame.columns, field="prompt").rows(frame, blank=config.failures.blank)
    bodies: list[dict[str, Any] | None] = []
    errors = dict(rows.errors)
    for position, code in enumerate(rows.codes):
        if code < 0:
            bodies.append(None)
            continue
        try:
            bodies.append(build(rows.value(int(code))))
        except InvalidRequest as exc:
            if exc.field != "prompt":
                raise  # a setting shared by every row: refused before anything is sent
            bodies.append(None)
            errors[position] = str(exc)
    if errors and config.failures.errors == "raise":
        position, message = min(errors.items())
        raise InvalidRequest("prompt", f"row {labels(frame, [position])[0]!r}: {message} (errors='coerce' "
                                       "makes it an error row)")
    prefix = config.output.prefix
    tidy.refuse_clash(frame.columns, TASK_COLUMNS, prefix=prefix, join=config.output.join)
    client, origin = _client.task_client(config.gateway, family)
    checkpoint, owned = open_for_run(config.store.checkpoint)
    try:
        run = TaskRun(client, family, model, frame.index, bodies, errors, config, origin=origin,
                      checkpoint=checkpoint)
        _client.stop_on_interrupt(run)
        with _client.run_tag(None, family.name) as run_label:
            done, summary = await run.run()
        described = records.Described({"prompt": prompt}, frame.index, prefix, run_label)
        records.record_tasks(checkpoint, run, done, summary, described)
    finally:
        if owned and checkpoint is not None:
            checkpoint.close()
    if run.failure is not None:
        raise run.failure
    return TaskFrame.of(wrap(frame, done, config), summary)


def prompts(frame: pd.DataFrame, prompt: TemplateSpec, system: str | None, system_field: str = "system",
            blank: str = BLANK_DEFAULT) -> Rows:
    """Per row: the prompt text, or (prompt, system) when a system text is given."""
    columns = frame.columns
    texts = Template.parse(prompt, columns, field="prompt").rows(frame, blank=blank)
    if system is None:
        return texts
    system_rows = Template.parse(system, columns, field=system_field, literal_ok=True).rows(frame, blank=blank)
    return texts.zip(system_rows)

async def run_rows(frame: pd.DataFrame, family: RowRecipe, rows: Rows, config: RunConfig,
                   template: Mapping[str, Any], convert: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
                   derived: GroundingPlan | None = None,
                   summarise: Callable[[RunSummary], RunSummary] | None = None) -> BatchFrame:
    """A row run: checked (rows, names, input limits), sent by the runner (or as provider batch jobs first),
    recorded, wrapped as a frame. `convert` types the answers, and `derived` names the columns it adds that
    the run's record keeps (the grounding: `run_answers` has no source text to align again); `summarise`
    makes the typed summary the frame carries from the runner's (extract's `ExtractRunSummary`)."""
    if rows.errors and config.failures.errors == "raise":
        position, message = next(iter(sorted(rows.errors.items())))
        label = frame.index[position]
        label = tuple(map(json_value, label)) if isinstance(label, tuple) else json_value(label)
        raise InvalidRequest(message.split(":", 1)[0],
                             f"row {label!r}: {message.split(': ', 1)[-1]} (errors='coerce' makes it an "
                             "error row)")
    check_names(frame, family, config, derived.columns() if derived is not None else ())
    warn_deterministic_repeats(family, config)
    connection = _client.connection(config.gateway)
    over = await over_limit_rows(family, rows, connection, config)
    if over is not None and len(over.positions):
        warnings.warn(over_limit_text(over, labels(frame, over.positions)), InputLimitWarning, stacklevel=2)
    checkpoint, owned = open_for_run(config.store.checkpoint)
    origin = await _client.checkpoint_origin(connection) if checkpoint is not None else connection.origin
    send, retry_delay, phase = connection.send, connection.retry_delay, None
    if config.batch is not None and config.batch is not False:  # provider batch jobs (frames/batch/run.py)
        phase, send, retry_delay, config = await batch_run.prepare(family, Batch(rows), config, connection,
                                                                   checkpoint, origin)
    runner = Runner(family, send, config, retry_delay=retry_delay, checkpoint=checkpoint,
                    description=f"{family.name} {family.model}", gateway=origin)
    try:
        with _client.run_tag(connection, family.name) as run_label:
            result = await _client.stoppable(runner, Batch(rows))
        if phase is not None:
            batch_run.finish(result.summary, phase, send)
        answers = None if result.failure is not None else result.frame(frame.index)
        answers = convert(answers) if answers is not None and convert is not None else answers
        kept = derived.record(answers) if derived is not None and answers is not None else None
        records.record_rows(checkpoint, runner, result, records.Described(
            template, frame.index, config.output.prefix, label=run_label, derived=kept))
    finally:
        if owned and checkpoint is not None:
            checkpoint.close()
    if over is not None:
        result.summary.over_limit = over.report(labels(frame, over.positions[:20]))
    if result.failure is not None:
        raise result.failure
    assert answers is not None, "no failure: the run's frame was read"
    long = wrap_repeats(frame, result.repeats_frame(frame.index), config) if config.repeats > 1 else None
    summary = result.summary if summarise is None else summarise(result.summary)
    return BatchFrame.wrap(wrap(frame, answers, config), summary, long)


def warn_deterministic_repeats(family: RowRecipe, config: RunConfig) -> None:
    """Said before the first request, so nothing is paid k times unawares."""
    greedy = repeats.deterministic(family.spec) if config.repeats > 1 else None
    if greedy is not None:
        warnings.warn(f"repeats={config.repeats} with {greedy}: the model is asked for its one most likely "
                      f"answer, so every repeat gives the same and is sent and paid {config.repeats} times; "
                      "use repeats=1, or sample (temperature > 0) to measure stability", RepeatsWarning,
                      stacklevel=4)


def grounding_plan(frame: pd.DataFrame, prompt: TemplateSpec, schema: Schema, grounding: GroundingMode | None,
                   source: str | None) -> GroundingPlan | None:
    """Extract's `grounding=` and `source=` as a plan, or None when off."""
    read = Template.parse(prompt, frame.columns, field="prompt").columns
    return GroundingPlan.of(grounding, source, schema, read, frame.columns)


def grounding_note(plan: GroundingPlan | None) -> dict[str, Any]:
    """What the run's record says of the grounding (it is part of the template: a change is a new run)."""
    return {} if plan is None else {"grounding": {"mode": plan.mode, "source": plan.source}}


def typed_and_grounded(frame: pd.DataFrame, schema: Schema,
                       plan: GroundingPlan | None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Extract's `convert`: the fields typed, then (with a grounding plan) aligned with the source column."""
    texts = None if plan is None else frame[next(c for c in frame.columns if str(c) == plan.source)].tolist()

    def convert(answers: pd.DataFrame) -> pd.DataFrame:
        answers = typed_columns(answers, schema)
        return answers if plan is None or texts is None else plan.apply(answers, texts)  # texts given iff plan

    return convert


def labels(frame: pd.DataFrame, positions: Any) -> list[Any]:
    """Index labels of row positions, as JSON-safe values (they go into `.attrs`)."""
    return [tuple(map(json_value, label)) if isinstance(label, tuple) else json_value(label)
            for label in frame.index[positions]]

def check_names(frame: pd.DataFrame, family: RowRecipe, config: RunConfig, extra: Sequence[str] = ()) -> None:
    """Refuse a column clash before anything is sent, not after the run has been paid for."""
    names = [*family.columns, *META_COLUMNS, *extra]
    if config.repeats > 1:
        names += [tidy.column(c, tidy.STD) for c in family.spread] + ["__repeats"]
        names += [tidy.column(repeats.stem(c), tidy.AGREEMENT) for c in family.decided]
    tidy.refuse_clash(frame.columns, names, prefix=config.output.prefix, join=config.output.join)

def wrap_repeats(frame: pd.DataFrame, long: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """The long repeats frame, named and joined as the run's result is."""
    if config.output.prefix:
        long.columns = [f"{config.output.prefix}{c}" for c in long.columns]
    if not config.output.join:
        return long
    inputs = frame.iloc[np.repeat(np.arange(len(frame)), config.repeats)]
    inputs.index = long.index
    return pd.concat([inputs, long], axis=1)

def wrap(frame: pd.DataFrame, answers: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """The answers named (`prefix`) and, with `join`, after the input columns, on the input's index."""
    if config.output.prefix:
        answers.columns = [f"{config.output.prefix}{c}" for c in answers.columns]
    if not config.output.join:
        return answers
    answers.index = frame.index  # the same object: concat aligns nothing, duplicates stay put
    return pd.concat([frame, answers], axis=1)


async def over_limit_rows(family: RowRecipe, rows: Rows, connection: Any, config: RunConfig) -> OverLimit | None:
    """With `pilot=` or `budget=`: the rows over the model's `max_input_tokens` (GET /models), checked
    before spending. None when not asked, or when the gateway lists no limit for the model."""
    if config.spending.pilot is None and config.spending.budget is None:
        return None
    limit = await connection.input_limit(family.model) if connection.input_limit is not None else None
    return over_limit(rows, family.model, limit) if limit else None


def over_limit_text(over: OverLimit, shown_labels: list[Any]) -> str:
    """The warning's text: how many rows, which (the first 10), and what to do before the full run."""
    shown = ", ".join(f"{label!r} (~{tokens} tokens)" for label, tokens in zip(shown_labels[:10], over.tokens[:10],
                                                                                   strict=False))
    more = f" and {len(shown_labels) - 10} more" if len(shown_labels) > 10 else ""
    return (f"{len(over.positions)} rows look longer than {over.model}'s input limit of {over.limit} tokens "
            f"(its max_input_tokens in GET /models; estimated at {BYTES_PER_TOKEN} bytes per token): rows "
            f"{shown}{more}. The gateway will refuse them: shorten or split them before the full run.")
