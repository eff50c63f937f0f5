"""The accessor's side of `batch=`: run the batch phase, then hand the runner a sender that sends nothing.

`prepare` submits and (with `wait`) collects the run's jobs (`frames/batch/jobs.py`); the runner that
follows serves every collected answer from the checkpoint (the columns a synchronous run gives) and
fails every other row with what its job said, in `__error`. `finish` writes what the jobs billed
into the run's summary: the run's cost is the sum its jobs billed, at the batch price.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.frames import _client
from gwlab.frames.batch.jobs import BatchOptions, BatchPhase, refusing_sender, run_batch_phase
from gwlab.frames.batch.pilot import batch_pilot_estimate
from gwlab.frames.recipes import RowRecipe
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.lifecycle import Progress
from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.runner import Batch, jobs_before
from gwlab.frames.run.usage import as_table
from gwlab.frames.store.checkpoint import AnswerStore

__all__ = ["finish", "prepare"]


class _JobsBar:
    """The run's bar over requests, with each job's status and counts beside it (refreshed per poll)."""

    def __init__(self, enabled: bool, description: str) -> None:
        self.enabled, self.description = enabled, description
        self.bar: Progress | None = None

    def __call__(self, entries: list[Any]) -> None:
        if not self.enabled or not entries:
            return
        total = sum(len(e.custom_ids) for e in entries)
        if self.bar is None:
            self.bar = Progress(True, total, f"batch {self.description}")
        finished = sum(int(e.counts.get("succeeded", 0)) + int(e.counts.get("errored", 0)) for e in entries)
        statuses: dict[str, int] = {}
        for e in entries:
            statuses[e.status] = statuses.get(e.status, 0) + 1
        self.bar.reach(finished, jobs=len(entries), **statuses)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def prepare(recipe: RowRecipe, batch: Batch, config: RunConfig, connection: Any,
                  checkpoint: AnswerStore | None, origin: str) -> tuple[BatchPhase, Any, Callable[..., Any], RunConfig]:
    """Run the batch phase; return it, the runner's sender and retry rule, and the runner's config (whose
    errors are coerced: a row's batch error is its `__error`, never the whole run's exception)."""
    options = BatchOptions.of(config.batch)
    assert options is not None
    if checkpoint is None:
        raise InvalidRequest("checkpoint", "batch= keeps its job ids and answers in the checkpoint: "
                             "pass a checkpoint path (or leave checkpoint='auto')")
    if config.repeats > 1:
        raise InvalidRequest("batch", "batch= does not take repeats= (yet): run those synchronously")
    if config.store.refresh:
        raise InvalidRequest("batch", "batch= with refresh=True would pay for answers the checkpoint has")
    client = _client.batch_client(connection.gateway, recipe.name)
    values = [batch.value(j) for j in range(len(batch))]
    spending = config.spending
    first_left = len(values) if spending.pilot is None else jobs_before(batch, spending.pilot)
    bar = _JobsBar(config.output.progress, f"{recipe.name} {recipe.model}")
    stopper: list[Any] = []
    _client.stop_on_interrupt(_Forward(stopper))
    try:
        phase = await run_batch_phase(recipe, values[:first_left], checkpoint, origin, client, options,
                                      prices=spending.prices, budget=Budget.of(spending.budget, spending.prices),
                                      progress=bar, stopper=stopper)
    finally:
        bar.close()
    if first_left < len(values):  # a pilot: the rest estimated from its job, at the batch price
        phase.pilot = batch_pilot_estimate(recipe, values[:first_left], values[first_left:],
                                           int(batch.rows_per_job[first_left:].sum()), phase, checkpoint, origin,
                                           as_table(spending.prices), options)
    send = refusing_sender(checkpoint.path, recipe, origin, phase.pending)
    return phase, send, lambda _exc, _attempt: None, config.but(budget=None, progress=False, errors="coerce")


class _Forward:
    """The run's Ctrl-C stopper reaches the batch phase's context (made inside the phase)."""

    def __init__(self, targets: list[Any]) -> None:
        self.targets = targets

    def stop(self, reason: str) -> None:
        for target in self.targets:
            target.stop(reason)


def finish(summary: RunSummary, phase: BatchPhase, send: Any) -> None:
    """The jobs' billing becomes the run's: cost, tokens and `.run.batch`."""
    summary.batch = phase.summary()
    if phase.pilot is not None:  # in place of the runner's estimate, which prices the rest synchronously
        summary.pilot = phase.pilot
    summary.cost = phase.cost
    summary.input_tokens, summary.output_tokens = phase.billed
    if phase.stopped and not summary.stopped:
        summary.stopped = phase.stopped
    journal = getattr(send, "journal", None)
    if journal is not None:
        journal.close()
