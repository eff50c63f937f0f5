"""A batch run's pilot: what the rows it left out would cost at the batch price, and how long their jobs may take.

`pilot=N` with `batch=` sends the requests of the first N rows as a batch job and estimates the rest from it:
tokens scaled from what the pilot's answers billed (input: billed over the runner's estimate of the same
bodies; output: billed per answer), priced at the model's batch rate; jobs as the provider's limits would
split them; time from the pilot jobs' own turnaround (the gateway's created and ended times) per request,
beside the gateway's window (its expires_at), past which a job expires with only part of its rows done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.frames.batch.jobs import BatchOptions, BatchPhase, api_for, bodies
from gwlab.frames.recipes import RowRecipe
from gwlab.frames.run.parts import BatchPilotEstimate
from gwlab.frames.run.usage import PriceTable
from gwlab.frames.store.checkpoint import AnswerStore, canonical, gateway_id
from gwlab.wire.jobs import batches as wb

__all__ = ["batch_pilot_estimate", "estimated_input"]


def estimated_input(body: Mapping[str, Any]) -> int:
    """The runner's conservative input estimate of one body (its canonical bytes, plus 8)."""
    return len(canonical(body).encode()) + 8


def batch_pilot_estimate(recipe: RowRecipe, pilot: Sequence[Any], rest: Sequence[Any], rows: int,
                         phase: BatchPhase, checkpoint: AnswerStore, origin: str, prices: PriceTable,
                         options: BatchOptions) -> BatchPilotEstimate:
    """`.run.pilot` of a batch run: the rest's requests, tokens, cost (batch price), jobs and seconds."""
    gateway = gateway_id(origin)
    asked = bodies(recipe, pilot, gateway)
    billed_in = billed_out = estimated = answered = 0
    for key, body in asked.items():
        entry = checkpoint.get(key)
        if entry is None:
            continue
        answered += 1
        estimated += estimated_input(body)
        billed_in += entry.input_tokens or 0
        billed_out += entry.output_tokens or 0
    ratio = billed_in / estimated if estimated else 1.0
    out_per_request = billed_out / answered if answered else float(recipe.reserved_output)
    wanted = bodies(recipe, rest, gateway)
    held = checkpoint.has_many(list(wanted))
    left = {key: body for key, body in wanted.items() if key not in held}
    tokens_in = sum(estimated_input(b) for b in left.values()) * ratio
    tokens_out = out_per_request * len(left)
    sizes = [len(wb.openai_line(key, "/v1" + recipe.endpoint, body)) for key, body in left.items()]
    jobs = wb.split_by_limits(sizes, api_for(recipe), max_requests=options.max_requests,
                              max_bytes=options.max_bytes) if sizes else []
    seconds, turnaround, window = _time(phase.timings, len(left))
    return BatchPilotEstimate(rows, len(left), tokens_in, tokens_out,
                              prices.cost(recipe.model, recipe.endpoint, tokens_in, tokens_out, batch=True),
                              len(jobs), seconds, turnaround, window)


def _time(timings: Sequence[tuple[int, float | None, float | None]], requests: int
          ) -> tuple[float, float | None, float]:
    """(seconds the rest may take, the pilot jobs' turnaround, the window). With no observed turnaround
    (the pilot job still running, or collected by an earlier call) the estimate is the window itself: all a
    provider promises is an answer within it."""
    windows = [w for _, _, w in timings if w is not None]
    window = max(windows) if windows else float(wb.WINDOW_SECONDS)
    seen = [(n, t) for n, t, _ in timings if t is not None and n > 0]
    if not seen:
        return (window if requests else 0.0), None, window
    turnaround = sum(t for _, t in seen)
    per_request = turnaround / sum(n for n, _ in seen)
    return per_request * requests, turnaround, window

