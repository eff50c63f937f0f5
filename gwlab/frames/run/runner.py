"""The batch runner: a frame's distinct requests sent concurrently, within limits, budget and checkpoint.

Rows become requests; identical requests are sent once (in flight and across runs, through the
checkpoint). A fixed pool of `concurrency` workers pulls requests from one iterator, so a million rows
cost a million small array slots, not a million tasks. Answers go straight into preallocated column
arrays (and their JSON into the checkpoint); no per-row object outlives its request.

Before each send the request's input tokens are estimated conservatively (the UTF-8 bytes of its JSON
body, which no subword tokenizer exceeds in practice, times a factor that only grows if an answer ever
reports more) and reserved against the budget; the real count replaces the reservation when the answer
arrives. A request that would not fit waits for in-flight ones to settle; if it still does not fit, the
run stops and the rest are reported not run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gwlab.errors import InvalidRequest, RateLimited
from gwlab.frames.recipes import RowRecipe
from gwlab.frames.run.budget import Budget, Spend
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.lifecycle import Commits, Progress, Stoppable, drive
from gwlab.frames.run.limiter import Limiter, TokenBucket
from gwlab.frames.run.outcome import (
    CACHED,
    ERROR,
    NOT_RUN,
    SENT,
    Batch,
    CachedFrom,
    PilotEstimate,
    RunResult,
    RunSummary,
    first_rows,
)
from gwlab.frames.run.usage import as_table
from gwlab.frames.store.checkpoint import AnswerStore, canonical, gateway_id, request_key
from gwlab.frames.store.lookahead import Lookahead
from gwlab.wire.families import ProtocolFamily
from gwlab.wire.schema import AnswerInvalid

__all__ = ["Answer", "Batch", "Budget", "RunResult", "RunSummary", "Runner", "Sender", "jobs_before"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What a sender returns: the parsed body, its text as received (for the checkpoint), the request ID."""

    data: Any
    text: str | None = None
    request_id: str | None = None
    reasks: int = 0  # the requests that asked again for this answer (an invalid structured answer)


# one attempt of a request of a protocol family (a row of gwlab.wire.families) with a JSON body
Sender = Callable[[ProtocolFamily, dict[str, Any]], Awaitable[Answer]]


class Runner(Stoppable):
    """Sends a `Batch` through `send`; one instance per run (it holds the run's counters)."""

    def __init__(self, recipe: RowRecipe, send: Sender, config: RunConfig, *,
                 retry_delay: Callable[[BaseException, int], float | None], checkpoint: AnswerStore | None = None,
                 description: str | None = None, gateway: str = "") -> None:
        budget = Budget.of(config.spending.budget, config.spending.prices)
        if budget is not None and recipe.charges_output and not recipe.reserved_output:
            raise InvalidRequest("max_tokens", "a budget on a text protocol needs max_tokens, so the "
                                               "output a request may bill is known before it is sent")
        self.recipe, self.send, self.config = recipe, send, config
        limits, spending = config.limits, config.spending
        assert limits.concurrency is not None  # RunConfig fills in the kind's default
        self.concurrency, self.repeats, self.pilot = limits.concurrency, config.repeats, spending.pilot
        self.limiter: Limiter = limits.limiter or TokenBucket(limits.requests_per_minute, limits.tokens_per_minute)
        self.prices = as_table(budget.prices if budget and budget.prices is not None else spending.prices)
        self.budget, self.checkpoint, self.refresh = budget, checkpoint, config.store.refresh
        self.errors, self.progress = config.failures.errors, config.output.progress
        self.retry_delay = retry_delay  # the client transport's policy (Connection.retry_delay): its one copy
        self.description = description or recipe.name
        # whose answers these are: part of every checkpoint key, so one gateway's are never another's
        self.gateway = gateway_id(gateway) if gateway else ""
        self._cached_at: list[float] = []  # when each answer served from the checkpoint arrived
        self.factor = 1.0  # grows only if an answer ever bills more than its estimate
        self._needs_text = (checkpoint is not None or budget is not None
                            or getattr(self.limiter, "counts_tokens", True))
        self._labels: dict[str, str] = {}

    def estimate(self, text: str) -> int:
        """Conservative input tokens of a request whose canonical JSON body is `text`."""
        return math.ceil(len(text.encode()) * self.factor) + 8

    async def run(self, batch: Batch) -> RunResult:
        started = time.perf_counter()
        k, jobs = self.repeats, len(batch)
        result = RunResult.empty(batch, self.recipe, k)
        spend = Spend(self.budget, self.prices, self.recipe)
        bar = Progress(self.progress, len(batch.row_job), self.description)
        remaining = np.full(jobs, k, dtype=np.int64)
        bar.advance(len(batch.row_errors))
        last_job = jobs if self.pilot is None else jobs_before(batch, self.pilot)
        items: Iterator[tuple[int, int]] = ((j, r) for j in range(last_job) for r in range(k))
        counters = {"sent": 0, "cached": 0, "rate_limited": 0, "input_tokens": 0, "output_tokens": 0}
        ahead = Lookahead(lambda job: self.recipe.body(batch.value(job)), (self.gateway, self.recipe.endpoint),
                          jobs=last_job, repeats=k, needs_text=self._needs_text, store=self.checkpoint,
                          look_up=not self.refresh)

        def finished(job: int) -> None:
            remaining[job] -= 1
            if remaining[job] == 0:
                bar.advance(int(batch.rows_per_job[job]))

        # a store that gathers answers into groups commits at once when a worker waits for it
        urge: Callable[[], None] = getattr(self.checkpoint, "urge", None) or (lambda: None)

        commits = Commits(finished)  # a row is done once its answer is committed

        async def worker() -> None:
            committing: list[concurrent.futures.Future[None]] = []  # this worker's answers not yet on disk
            for job, repeat in items:
                if self._stopping:
                    break
                stored = await self._one(job, repeat, ahead, result, spend, counters)
                if stored is None:
                    finished(job)
                    continue
                commits.watch(job, stored)  # the worker sends its next request meanwhile
                committing = [*_pending(committing), stored]
                if len(committing) > 1:  # one answer of a worker off disk at a time: a slow disk slows the
                    urge()  # run rather than leaving paid answers queued
                    await asyncio.wait([asyncio.wrap_future(f) for f in committing[:-1]])
            urge()
            await asyncio.gather(*(asyncio.wrap_future(f) for f in committing))
            await commits.settled()

        await drive([worker() for _ in range(min(self.concurrency, max(1, jobs * k)))], self.checkpoint, bar)
        if self.pilot is not None and last_job < jobs and not self._stopping:
            self._stopping = "pilot"
        result.summary = self._summary(result, spend, counters, time.perf_counter() - started)
        if self._stopping == "pilot":
            result.summary.pilot = self._pilot_estimate(result, last_job)
        return result

    async def _one(self, job: int, repeat: int, ahead: Lookahead, result: RunResult, spend: Spend,
                   counters: dict[str, int]) -> concurrent.futures.Future[None] | None:
        """Ask one request (or read it from the checkpoint); the future of its answer's commit, if any."""
        recipe, batch = self.recipe, result.batch
        try:
            body, text, key, entry = ahead.take(job, repeat)
        except (InvalidRequest, ValueError, TypeError) as exc:
            self._fail(result, job, repeat, exc)
            return None
        result.key[repeat, job] = key or None  # the run record lists it (records.py): made once, here
        if self.checkpoint is not None and not self.refresh:
            if entry is None:  # a store shared by workers: wait for a request another worker is asking
                entry = await self.checkpoint.claim(key)
            if entry is not None:
                if entry.created is not None:
                    self._cached_at.append(entry.created)
                self._store(result, job, repeat, entry.data(), entry.request_id, entry.input_tokens,
                            entry.output_tokens, CACHED)
                counters["cached"] += 1
                return None
        estimate = self.estimate(text) if text else 0
        while not spend.fits(estimate, recipe.reserved_output):
            if spend.in_flight == 0 or self._stopping:
                self.stop("budget")
                if self.checkpoint is not None:
                    self.checkpoint.release(key)
                return None
            async with spend.changed:
                await spend.changed.wait()
        held = spend.hold(estimate, recipe.reserved_output)
        paid = [0, 0]  # tokens of every answer this row's requests got: re-asks and invalid answers included
        try:
            await self.limiter.acquire(estimate)
            if recipe.exchange is None:
                reply = await self._send_with_pauses(body, estimate, counters, paid)
            else:  # the recipe drives the row's requests (re-asks, a resend in another form)
                reply = await recipe.exchange(batch.value(job), self._row_send(estimate, counters, paid))
                counters["reasked"] = counters.get("reasked", 0) + reply.reasks
            tokens_in, tokens_out = (t or 0 for t in recipe.usage(reply.data))
            if estimate and tokens_in > estimate:
                self.factor *= tokens_in / estimate
            self.limiter.settle(estimate, tokens_in)
            self._store(result, job, repeat, reply.data, reply.request_id, tokens_in, tokens_out, SENT)
            counters["sent"] += 1
            if self.checkpoint is not None:
                return self.checkpoint.put(key, recipe.endpoint, recipe.model, reply.text or canonical(reply.data),
                                           reply.request_id, tokens_in, tokens_out, self.gateway)
            return None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.limiter.settle(estimate, paid[0])
            if self.checkpoint is not None:
                self.checkpoint.release(key)
            self._fail(result, job, repeat, exc)
            return None
        finally:
            # the bill is what was paid, whatever became of the answer (an invalid one, a re-ask that failed)
            counters["input_tokens"] += paid[0]
            counters["output_tokens"] += paid[1]
            await spend.settle(held, *paid)

    def _row_send(self, estimate: int, counters: dict[str, int],
                  paid: list[int]) -> Callable[[dict[str, Any]], Awaitable[Answer]]:
        """A row's send for its recipe's exchange: the first request uses the limiter slot the row took, each
        later one (a re-ask) takes its own; every answer's usage is added to the row's (`paid`), so the
        budget and the checkpoint count what was paid."""
        sent = 0

        async def send(body: dict[str, Any]) -> Answer:
            nonlocal sent
            if sent:
                await self.limiter.acquire(estimate)
            sent += 1
            answer = await self._send_with_pauses(body, estimate, counters, paid)
            if sent > 1:
                self.limiter.settle(estimate, 0)  # the row's one settle counts every ask's tokens
            return answer

        return send

    async def _send_with_pauses(self, body: dict[str, Any], estimate: int, counters: dict[str, int],
                                paid: list[int]) -> Answer:
        """Send, retrying as `retry_delay` (the client's policy) says; a 429 pauses every worker, not only
        this one. An answer's usage is added to `paid` as it arrives: the gateway billed it, whatever the
        row makes of it later (the client ledger records the same figure for the same request)."""
        for attempt in itertools.count():
            try:
                answer = await self.send(self.recipe.family, body)
            except Exception as exc:
                limited = isinstance(exc, RateLimited)
                if limited:
                    counters["rate_limited"] += 1
                wait = self.retry_delay(exc, attempt)
                if wait is None:
                    raise
                if limited:
                    self.limiter.pause(wait)
                    await self.limiter.acquire(estimate)
                else:
                    await asyncio.sleep(wait)
                continue
            tokens_in, tokens_out = self.recipe.usage(answer.data)
            paid[0] += tokens_in or 0
            paid[1] += tokens_out or 0
            return answer
        raise AssertionError("unreachable")

    def _store(self, result: RunResult, job: int, repeat: int, data: Any, request_id: str | None,
               tokens_in: int | None, tokens_out: int | None, status: int) -> None:
        invalid: AnswerInvalid | None = None
        try:
            answer = self.recipe.record(data)
        except AnswerInvalid as exc:  # paid for and kept (its raw text), but not an answer: an error row
            answer, invalid = exc.record, exc
        record = {name: self._labels.setdefault(value, value)  # "billing" x 1M rows: one string, not 1M
                  if isinstance(value, str) and len(value) < 64 else value
                  for name, value in answer.items()}
        result.fill(repeat, job, record, (tokens_in, tokens_out), request_id)
        result.status[repeat, job] = status
        if invalid is not None:
            result.status[repeat, job] = ERROR
            result.error[repeat, job] = f"{type(invalid).__name__}: {invalid}"

    def _fail(self, result: RunResult, job: int, repeat: int, exc: BaseException) -> None:
        result.status[repeat, job] = ERROR
        result.error[repeat, job] = f"{type(exc).__name__}: {exc}"
        result.request_id[repeat, job] = getattr(exc, "request_id", None)
        if self.errors == "raise" and result.failure is None:
            result.failure = exc
            self.stop("error")

    def _summary(self, result: RunResult, spend: Spend, counters: dict[str, int],
                 elapsed: float) -> RunSummary:
        batch = result.batch
        per_job = result.job_status()
        row_status = np.where(batch.row_job >= 0, per_job[np.clip(batch.row_job, 0, None)], ERROR) \
            if len(batch) else np.full(len(batch.row_job), ERROR)
        first = first_rows(batch.row_job)
        answered = (row_status == SENT) | (row_status == CACHED)
        return RunSummary(
            rows=len(batch.row_job), requests=len(batch) * self.repeats, sent=counters["sent"],
            cached=counters["cached"], sent_rows=int(((row_status == SENT) & first).sum()),
            cached_rows=int(((row_status == CACHED) & first).sum()),
            duplicate_rows=int((answered & ~first).sum()), error_rows=int((row_status == ERROR).sum()),
            invalid_rows=int((batch.row_job < 0).sum()), not_run_rows=int((row_status == NOT_RUN).sum()),
            input_tokens=counters["input_tokens"], output_tokens=counters["output_tokens"],
            cost=spend.cost, elapsed=elapsed, rate_limited=counters["rate_limited"],
            reasked=counters.get("reasked", 0),
            waited=float(getattr(self.limiter, "waited", 0.0)), stopped=self._stopping,
            endpoint=self.recipe.endpoint, model=self.recipe.model, gateway=self.gateway,
            cached_from=self._cached_from(counters["cached"]),
            checkpoint=str(self.checkpoint.path) if self.checkpoint is not None else None)

    def _cached_from(self, cached: int) -> CachedFrom | None:
        """Where and when the answers served from the checkpoint came from (None: none were)."""
        if not cached:
            return None
        times = self._cached_at or [math.nan]
        return CachedFrom(self.gateway, cached, _iso(min(times)), _iso(max(times)))

    def _pilot_estimate(self, result: RunResult, first_left: int) -> PilotEstimate:
        """Tokens and dollars the rows a pilot left out would cost, scaled from the pilot's real counts."""
        batch, recipe = result.batch, self.recipe
        sent = result.status == SENT
        estimated = actual_in = actual_out = 0.0
        n_sent = int(sent.sum())
        for r, j in zip(*np.nonzero(sent), strict=True):
            estimated += self.estimate(canonical(recipe.body(batch.value(int(j)))))
            actual_in += result.input_tokens[r, j]
            actual_out += result.output_tokens[r, j]
        ratio = actual_in / estimated if estimated else 1.0
        out_per_request = actual_out / n_sent if n_sent else float(recipe.reserved_output)
        keys, texts = [], []
        for j in range(first_left, len(batch)):
            body = recipe.body(batch.value(int(j)))
            for r in range(self.repeats):
                keys.append(request_key(self.gateway, recipe.endpoint, body, r))
                texts.append(canonical(body))
        cached = self.checkpoint.has_many(keys) if self.checkpoint is not None and not self.refresh else set()
        left = [self.estimate(t) for key, t in zip(keys, texts, strict=True) if key not in cached]
        tokens_in = sum(left) * ratio
        requests = len(keys) - len(cached)
        tokens_out = out_per_request * requests
        rows = int(batch.rows_per_job[first_left:].sum())
        return PilotEstimate(rows, requests, tokens_in, tokens_out,
                             self.prices.cost(recipe.model, recipe.endpoint, tokens_in, tokens_out))


def _pending(commits: list[concurrent.futures.Future[None]]) -> list[concurrent.futures.Future[None]]:
    """The commits not yet done; a failed one raises its error (the run stops: its answers are not safe)."""
    return [f for f in commits if not f.done() or f.result()]


def _iso(epoch: float) -> str | None:
    """UTC ISO time of an epoch (None when unknown), as plain text: it survives `.attrs`, pickle, Parquet."""
    if math.isnan(epoch):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def jobs_before(batch: Batch, rows: int) -> int:
    """How many distinct requests the first `rows` rows need (jobs are numbered by first appearance)."""
    head = batch.row_job[:max(0, rows)]
    head = head[head >= 0]
    return int(head.max()) + 1 if len(head) else 0

