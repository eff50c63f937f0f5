"""`batch=` on the text runs: a frame's unanswered requests sent as provider batch jobs (half the price).

The requests a run would send become one or more jobs (split by the provider's request and byte
limits). Each request's custom id is its checkpoint key, so the id <-> row map is the checkpoint's own
and an answer lands exactly where a synchronous answer would. Before each submit the journal
(`batch_journal.py`) records the submission; a kernel killed at any later point finds the job again
(by id, or by looking its token up) and polls it instead of paying twice. Every terminal job's output
and error files are both read; finished answers go into the checkpoint, per-row errors into the
journal, and rows that did not finish (expired, cancelled, missing) stay eligible for the next job.
The synchronous runner then builds the columns from the checkpoint, so a batch run returns exactly
the columns of a synchronous one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import BatchRowError, GatewayError, InvalidRequest
from gwlab.frames.batch.journal import SUBMITTING, Journal, JournalEntry
from gwlab.frames.recipes import RowRecipe
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.parts import BatchEstimate, BatchSummary, PilotEstimate
from gwlab.frames.run.usage import PriceTable, as_table
from gwlab.frames.store.checkpoint import AnswerStore, canonical, gateway_id, request_key
from gwlab.wire.jobs import batches as wb
from gwlab.wire.jobs.batches import BatchAPI, BatchJob

__all__ = ["BatchOptions", "BatchPhase", "BatchRowError", "run_batch_phase"]

_API_OF_FAMILY = {"chat": wb.OPENAI_BATCHES, "responses": wb.OPENAI_BATCHES, "embeddings": wb.OPENAI_BATCHES,
                  "messages": wb.ANTHROPIC_BATCHES}
CANCEL_WAIT_SECONDS = 120.0  # after a cancel, how long the finished lines are waited for


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """How a run goes as provider batch jobs; `batch=True` is `BatchOptions()`.

    Parameters
    ----------
    wait : bool, default True
        Poll until every job ends and return the answers. False: submit and return at once with the
        rows pending; the same call run again later, from any kernel on the same checkpoint, collects.
    poll, max_poll : float, default 1.0 and 30.0
        The first pause between polls, in seconds, and its cap (it doubles: backoff).
    timeout : float, optional
        Stop waiting after this many seconds (the jobs keep running; run again to collect).
    max_requests, max_bytes : int, optional
        Smaller jobs than the provider's limits (never larger).
    """

    wait: bool = True
    poll: float = 1.0
    max_poll: float = 30.0
    timeout: float | None = None
    max_requests: int | None = None
    max_bytes: int | None = None

    @classmethod
    def of(cls, value: Any) -> BatchOptions | None:
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(cls.__dataclass_fields__))
            if unknown:
                raise InvalidRequest(f"batch.{unknown[0]}", f"unknown batch option; the options are "
                                                            f"{', '.join(cls.__dataclass_fields__)}")
            return cls(**value)
        raise InvalidRequest("batch", f"True, a dict or a BatchOptions; got {type(value).__name__}")


@dataclass(slots=True)
class BatchPhase:
    """What the batch part of a run did; `summary()` goes to `.run.batch`."""

    api: str
    jobs: list[JournalEntry] = field(default_factory=list)
    submitted: int = 0  # requests sent in new jobs by this call
    collected: int = 0  # answers taken into the checkpoint by this call
    counts: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    billed: tuple[int, int] = (0, 0)
    stopped: str | None = None
    pending: set[str] = field(default_factory=set)  # custom ids still running (wait=False or timeout)
    estimate: BatchEstimate | None = None  # with a budget: what the submitted requests may cost at most
    timings: list[tuple[int, float | None, float | None]] = field(default_factory=list)  # per collected job:
    # (requests, seconds from creation to its end, its window), from the gateway's own times (pilot.py)
    pilot: PilotEstimate | None = None  # with pilot=: the rest's estimate at the batch price (pilot.py)

    def summary(self) -> BatchSummary:
        return BatchSummary(self.api, [e.job_id for e in self.jobs], self.submitted, self.collected, dict(self.counts),
                            self.cost, self.billed[0], self.billed[1], len(self.pending), self.stopped, self.estimate)


@dataclass(slots=True)
class _Context:
    recipe: RowRecipe
    api: BatchAPI
    client: Any  # gwlab.client.batches.AsyncBatches or AsyncMessageBatches
    journal: Journal
    checkpoint: AnswerStore
    gateway: str  # gateway_id of the run's origin
    prices: PriceTable
    options: BatchOptions
    progress: Any = None
    stopping: list[str] = field(default_factory=list)
    wanted: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom id -> body, of this run

    def stop(self, reason: str) -> None:
        """What a Ctrl-C (the run's stopper) or a budget stop calls: cancel the jobs, keep what finished."""
        self.stopping.append(reason)


def api_for(recipe: RowRecipe) -> BatchAPI:
    api = _API_OF_FAMILY.get(recipe.name)
    if api is None:
        raise InvalidRequest("batch", f"{recipe.name} rows cannot go as a provider batch job; batch= takes "
                             "chat, respond, messages and extract runs")
    return api


def bodies(recipe: RowRecipe, values: Sequence[Any], gateway: str) -> dict[str, dict[str, Any]]:
    """custom id (the checkpoint key) -> body, for every row value whose body builds; order kept."""
    out: dict[str, dict[str, Any]] = {}
    for value in values:
        try:
            body = recipe.body(value)
        except (InvalidRequest, ValueError, TypeError):
            continue  # the runner fails this row with the same error
        out.setdefault(request_key(gateway, recipe.endpoint, body), body)
    return out


async def run_batch_phase(recipe: RowRecipe, values: Sequence[Any], checkpoint: AnswerStore, origin: str,
                          client: Any, options: BatchOptions, prices: Any = None, budget: Budget | None = None,
                          progress: Any = None, stopper: Any = None) -> BatchPhase:
    """Submit the unanswered requests of `values` as batch jobs, then (with `wait`) poll and collect them."""
    api = api_for(recipe)
    path = getattr(checkpoint, "path", None)
    if path is None or str(path).startswith(("postgres", "postgresql")):
        raise InvalidRequest("checkpoint", "batch= needs a SQLite checkpoint file: the job ids are kept there")
    gateway = gateway_id(origin)
    ctx = _Context(recipe, api, client, Journal(path), checkpoint, gateway, as_table(prices), options, progress)
    if stopper is not None:
        stopper.append(ctx)
    phase = BatchPhase(api.name)
    try:
        wanted = ctx.wanted = bodies(recipe, values, gateway)
        done = checkpoint.has_many(wanted)  # batch runs refuse refresh=True: never pay for an answer held
        await _resume_submissions(ctx)
        running = {cid for e in ctx.journal.entries(gateway=gateway, open_only=True) for cid in e.custom_ids}
        fresh = [cid for cid in wanted if cid not in done and cid not in running]
        fresh = _within_budget(ctx, phase, fresh, wanted, budget)
        await _submit(ctx, phase, [(cid, wanted[cid]) for cid in fresh])
        entries = [e for e in ctx.journal.entries(gateway=gateway, open_only=True)
                   if set(e.custom_ids) & wanted.keys()]
        phase.jobs = entries
        if options.wait:
            await _wait_and_collect(ctx, phase, entries)
        phase.jobs = [ctx.journal.entry(e.token) or e for e in entries]
        phase.pending = {cid for e in phase.jobs if not e.collected for cid in e.custom_ids}
    finally:
        ctx.journal.close()
    return phase


# --- submitting ----------------------------------------------------------------------------------------
def _line_size(recipe: RowRecipe, cid: str, body: Mapping[str, Any]) -> int:
    return len(wb.openai_line(cid, "/v1" + recipe.endpoint, body))


def _within_budget(ctx: _Context, phase: BatchPhase, fresh: list[str], wanted: Mapping[str, dict[str, Any]],
                   budget: Budget | None) -> list[str]:
    """The requests whose estimate fits the budget, at the batch price (input: the body's bytes, the
    runner's conservative guess; output: the whole max_tokens); the rest are not submitted and the run
    says it stopped for the budget. A job is never submitted beyond the budget."""
    if budget is None or not fresh:
        return fresh
    prices = as_table(budget.prices) if budget.prices is not None else ctx.prices
    if budget.cost is not None and prices.price(ctx.recipe.model) is None:
        raise InvalidRequest("budget", f"no price for model {ctx.recipe.model!r}: a cost budget needs one")
    if ctx.recipe.charges_output and not ctx.recipe.reserved_output:
        raise InvalidRequest("max_tokens", "a budget on a batch run needs max_tokens, so the output a request "
                                           "may bill is known before it is submitted")
    tokens = cost = 0.0
    kept: list[str] = []
    for cid in fresh:
        tokens_in, tokens_out = len(canonical(wanted[cid]).encode()) + 8, ctx.recipe.reserved_output
        billed = tokens_in + (tokens_out if ctx.recipe.charges_output else 0)
        price = prices.cost(ctx.recipe.model, ctx.recipe.endpoint, tokens_in, tokens_out, batch=True)
        if ((budget.tokens is not None and tokens + billed > budget.tokens)
                or (budget.cost is not None and cost + price > budget.cost)):
            phase.stopped = "budget"
            break
        tokens, cost = tokens + billed, cost + price
        kept.append(cid)
    phase.estimate = BatchEstimate(len(kept), tokens, cost)
    return kept


async def _submit(ctx: _Context, phase: BatchPhase, items: list[tuple[str, dict[str, Any]]]) -> None:
    if not items:
        return
    wb.check_custom_ids([cid for cid, _ in items], ctx.api)
    sizes = [_line_size(ctx.recipe, cid, body) for cid, body in items]
    for chunk in wb.split_by_limits(sizes, ctx.api, max_requests=ctx.options.max_requests,
                                    max_bytes=ctx.options.max_bytes):
        if ctx.stopping:
            phase.stopped = phase.stopped or ctx.stopping[0]
            return
        part = [items[i] for i in chunk]
        token = secrets.token_hex(8)
        ctx.journal.begin(token, ctx.api.name, ctx.gateway, ctx.recipe.endpoint, ctx.recipe.model,
                          [cid for cid, _ in part])  # before the submit: a kill from here on is recoverable
        job = await _send(ctx, token, part)
        ctx.journal.submitted(token, job.id, job.status)
        phase.submitted += len(part)


async def _send(ctx: _Context, token: str, part: list[tuple[str, dict[str, Any]]]) -> BatchJob:
    from gwlab.errors import StatusError

    try:
        job: BatchJob
        if ctx.api.name == "anthropic":
            job = await ctx.client.submit(part)
        else:
            job = await ctx.client.submit(part, endpoint="/v1" + ctx.recipe.endpoint,
                                          metadata={"gwlab_submission": token})
        return job
    except (InvalidRequest, StatusError) as exc:  # refused before acceptance (4xx, or refused locally)
        if isinstance(exc, InvalidRequest) or 400 <= (getattr(exc, "status", 500) or 500) < 500:
            ctx.journal.abandon(token, f"{type(exc).__name__}: {exc}")
        raise


async def _resume_submissions(ctx: _Context) -> None:
    """Submissions a killed kernel left without a job id: found by their token (or size and time), else sent."""
    for entry in ctx.journal.entries(gateway=ctx.gateway, open_only=True):
        if entry.status != SUBMITTING or entry.job_id:
            continue
        if ctx.api.name == "openai":
            found = await ctx.client.find(entry.token, since=entry.created)
        else:
            found = await ctx.client.find(len(entry.custom_ids), since=entry.created)
        if found is None:  # never created: send it now, under the same token
            bodies_left = _bodies_of(ctx, entry)
            if bodies_left is None:
                ctx.journal.abandon(entry.token, "its request bodies are not in this run")
                continue
            found = await _send(ctx, entry.token, bodies_left)
        ctx.journal.submitted(entry.token, found.id, found.status)


def _bodies_of(ctx: _Context, entry: JournalEntry) -> list[tuple[str, dict[str, Any]]] | None:
    if not all(cid in ctx.wanted for cid in entry.custom_ids):
        return None
    return [(cid, ctx.wanted[cid]) for cid in entry.custom_ids]


# --- waiting and collecting -------------------------------------------------------------------------------
async def _wait_and_collect(ctx: _Context, phase: BatchPhase, entries: list[JournalEntry]) -> None:
    open_ = {e.token: e for e in entries if e.job_id}
    pause, started, cancelled_at = ctx.options.poll, time.monotonic(), None
    while open_:
        if ctx.stopping and cancelled_at is None:  # Ctrl-C or a budget stop: cancel, keep what finished
            phase.stopped = phase.stopped or ctx.stopping[0]
            for e in open_.values():
                await _cancel(ctx, e)
            cancelled_at = time.monotonic()
        for token, e in list(open_.items()):
            job = await ctx.client.retrieve(e.job_id)
            ctx.journal.update(token, job.status, _counts(job))
            if job.terminal:
                await _collect(ctx, phase, e, job)
                del open_[token]
        _show(ctx, entries)
        if not open_:
            break
        waited = time.monotonic() - started
        if ctx.options.timeout is not None and waited >= ctx.options.timeout and cancelled_at is None:
            phase.stopped = phase.stopped or "timeout"
            return
        if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_WAIT_SECONDS:
            return
        await asyncio.sleep(pause)
        pause = min(pause * 2, ctx.options.max_poll)


async def _cancel(ctx: _Context, entry: JournalEntry) -> None:
    with contextlib.suppress(GatewayError):  # already ended: it is collected as it is
        await ctx.client.cancel(entry.job_id)


def _counts(job: BatchJob) -> dict[str, int]:
    return {"total": job.total, "succeeded": job.succeeded, "errored": job.errored, "pending": job.pending}


async def _collect(ctx: _Context, phase: BatchPhase, entry: JournalEntry, job: BatchJob) -> None:
    """Both result files into the checkpoint: answers as answers, errors into the journal; once."""
    collation = await ctx.client.results(job, entry.custom_ids)
    billed_in = billed_out = 0
    errors: list[tuple[str, str, str]] = []
    for cid, result in collation.results.items():
        if result.ok and result.body is not None:
            tokens_in, tokens_out = (t or 0 for t in ctx.recipe.usage(result.body))
            billed_in, billed_out = billed_in + tokens_in, billed_out + tokens_out
            ctx.checkpoint.put(cid, ctx.recipe.endpoint, ctx.recipe.model, json.dumps(result.body),
                               _request_id(result), tokens_in, tokens_out, ctx.gateway)
        elif result.kind == "errored":
            errors.append((cid, "errored", _error_text(result.error)))
    ctx.checkpoint.flush()
    ctx.client.record(collation, path=ctx.recipe.endpoint, model=ctx.recipe.model)  # gw.usage, batch rate
    counts = {**collation.counts(), "total": len(entry.custom_ids)}
    cost = ctx.prices.cost(ctx.recipe.model, ctx.recipe.endpoint, billed_in, billed_out, batch=True)
    ctx.journal.collected(entry.token, job.status, counts, cost, (billed_in, billed_out), errors)
    phase.collected += counts.get("succeeded", 0)
    phase.timings.append((len(entry.custom_ids), *wb.timing(job)))
    phase.cost += cost
    phase.billed = (phase.billed[0] + billed_in, phase.billed[1] + billed_out)
    for name, n in counts.items():
        phase.counts[name] = phase.counts.get(name, 0) + n


def _request_id(result: wb.BatchResult) -> str | None:
    body = result.body or {}
    return body.get("id") if isinstance(body.get("id"), str) else None


def _error_text(error: Mapping[str, Any] | None) -> str:
    if not error:
        return "the batch job reported an error for this request"
    return str(error.get("message") or error)


def _show(ctx: _Context, entries: list[JournalEntry]) -> None:
    if ctx.progress is not None:
        ctx.progress([ctx.journal.entry(e.token) or e for e in entries])


def refusing_sender(checkpoint_path: Any, recipe: RowRecipe, gateway: str, pending: set[str]) -> Any:
    """The sender the runner gets after a batch phase: nothing is sent synchronously; a row without an
    answer fails with what the batch said (its error, or that it did not finish)."""
    journal = Journal(checkpoint_path)
    gw = gateway_id(gateway)

    async def send(family: Any, body: dict[str, Any]) -> Any:
        cid = request_key(gw, recipe.endpoint, body)
        if cid in pending:
            raise BatchRowError("still running in a batch job: run the same call again to collect it")
        found = journal.errors_for([cid]).get(cid)
        if found is not None:
            raise BatchRowError(f"the batch job answered with an error: {found[1]}")
        raise BatchRowError("not answered by its batch job (expired, cancelled, missing or not submitted): "
                            "run the same call again to send it in a new job")

    send.journal = journal  # type: ignore[attr-defined]  # closed by the caller
    return send


def batches(checkpoint: Any = "auto") -> Any:
    """The provider batch jobs recorded in a checkpoint, newest first.

    Parameters
    ----------
    checkpoint : path or "auto", default "auto"
        The SQLite checkpoint the batch runs wrote (``$GWLAB_CHECKPOINT`` or the default file).

    Returns
    -------
    DataFrame
        One row per job: ``job_id``, ``api``, ``status``, ``requests``, ``succeeded``, ``errored``,
        ``pending``, ``age_s``, ``cost`` (what it billed, at the batch price), tokens, ``collected``.
    """
    import pandas as pd

    from gwlab.frames.store.stores import open_for_run

    store, owned = open_for_run(checkpoint)
    path = getattr(store, "path", None)
    try:
        if path is None:
            return pd.DataFrame(columns=list(_LISTING))
        journal = Journal(path)
        try:
            entries = journal.entries()
        finally:
            journal.close()
    finally:
        if owned and store is not None:
            store.close()
    now = time.time()
    rows = [{"job_id": e.job_id, "api": e.api, "status": e.status, "requests": len(e.custom_ids),
             "succeeded": e.counts.get("succeeded"), "errored": e.counts.get("errored"),
             "pending": e.counts.get("pending"), "age_s": now - e.created, "cost": e.cost,
             "input_tokens": e.billed_input, "output_tokens": e.billed_output, "collected": e.collected,
             "model": e.model, "endpoint": e.endpoint, "gateway": e.gateway, "token": e.token} for e in entries]
    frame = pd.DataFrame(rows, columns=list(_LISTING))
    return frame.iloc[::-1].reset_index(drop=True)


_LISTING = ("job_id", "api", "status", "requests", "succeeded", "errored", "pending", "age_s", "cost",
            "input_tokens", "output_tokens", "collected", "model", "endpoint", "gateway", "token")
