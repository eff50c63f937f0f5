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
import itertools
import math
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest, RateLimited
from gwlab.frames.checkpoint import Checkpoint, canonical, request_key
from gwlab.frames.families import META_COLUMNS, Family
from gwlab.frames.limiter import Limiter, TokenBucket
from gwlab.frames.usage import PriceTable, as_table

__all__ = ["Batch", "Budget", "Reply", "RunResult", "RunSummary", "Runner", "Sender"]

NOT_RUN, SENT, CACHED, ERROR = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Reply:
    """What a sender returns: the parsed body, its text as received (for the checkpoint), the request ID."""

    data: Any
    text: str | None = None
    request_id: str | None = None


Sender = Callable[[str, dict[str, Any]], Awaitable[Reply]]


@dataclass(frozen=True)
class Budget:
    """A ceiling on what one run may spend: billed tokens, dollars (with `prices`), or both."""

    tokens: int | None = None
    cost: float | None = None
    prices: PriceTable | Mapping[str, Any] | None = None

    @classmethod
    def of(cls, value: int | float | Budget | None, prices: Any = None) -> Budget | None:
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest("budget", f"a whole number of tokens, or Budget(cost=..., prices=...); "
                                           f"got {value!r}")
        return cls(tokens=value, prices=prices)


class Batch:
    """The distinct requests of a run (in order of first appearance) and the request of every row."""

    def __init__(self, values: Sequence[Any], errors: Mapping[int, str] | None = None) -> None:
        errors = dict(errors or {})
        seen: dict[Any, int] = {}
        self.values: list[Any] = []
        row_job = np.empty(len(values), dtype=np.int64)
        for position, value in enumerate(values):
            if position in errors:
                row_job[position] = -1
                continue
            key = canonical(value) if isinstance(value, Mapping | list) else value
            job = seen.get(key)
            if job is None:
                job = seen[key] = len(self.values)
                self.values.append(value)
            row_job[position] = job
        self.row_job = row_job
        self.row_errors = errors
        self.rows_per_job = np.bincount(row_job[row_job >= 0], minlength=len(self.values))

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class RunSummary:
    """What a run did, for the result's repr and `.attrs`."""

    rows: int = 0
    requests: int = 0  # distinct requests (after dedupe), times repeats
    sent: int = 0
    cached: int = 0
    duplicate_rows: int = 0
    error_rows: int = 0
    not_run_rows: int = 0
    input_tokens: int = 0  # billed in this run (sent requests only)
    output_tokens: int = 0
    cost: float = 0.0
    elapsed: float = 0.0
    rate_limited: int = 0
    waited: float = 0.0
    stopped: str | None = None  # "budget" | "pilot" | "interrupted" | "error"
    pilot: dict[str, Any] | None = None  # the estimate for the rows a pilot left out
    endpoint: str = ""
    model: str = ""

    def text(self) -> str:
        cost = "n/a" if math.isnan(self.cost) else f"${self.cost:.4f}"
        parts = [f"{self.rows} rows", f"{self.sent} sent", f"{self.cached} cached",
                 f"{self.duplicate_rows} duplicate", f"{self.error_rows} errors"]
        if self.not_run_rows:
            parts.append(f"{self.not_run_rows} not run")
        line = (f"{self.model} {self.endpoint}: " + ", ".join(parts)
                + f" · {self.input_tokens} in / {self.output_tokens} out tokens · est. {cost}"
                + f" · {self.elapsed:.1f}s")
        if self.stopped:
            line += f" · stopped: {self.stopped}"
        if self.pilot:
            p = self.pilot
            rest_cost = "n/a" if math.isnan(p["cost"]) else f"${p['cost']:.4f}"
            line += (f"\npilot: the other {p['rows']} rows need {p['requests']} requests, "
                     f"about {p['input_tokens']:.0f} in / {p['output_tokens']:.0f} out tokens, "
                     f"est. {rest_cost}")
        return line


class _Spend:
    """Budget bookkeeping: billed so far plus reservations of requests in flight."""

    def __init__(self, budget: Budget | None, prices: PriceTable, family: Family) -> None:
        self.budget, self.prices, self.family = budget, prices, family
        self.tokens = 0.0
        self.cost = 0.0
        self.held_tokens = 0.0
        self.held_cost = 0.0
        self.in_flight = 0
        self.changed = asyncio.Condition()

    def _price(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed = tokens_in + (tokens_out if self.family.charges_output else 0)
        cost = self.prices.cost(self.family.model, self.family.endpoint, tokens_in, tokens_out)
        return billed, cost

    def fits(self, tokens_in: float, tokens_out: float) -> bool:
        if self.budget is None:
            return True
        billed, cost = self._price(tokens_in, tokens_out)
        if self.budget.tokens is not None and self.tokens + self.held_tokens + billed > self.budget.tokens:
            return False
        if self.budget.cost is not None:
            if math.isnan(cost):
                raise InvalidRequest("budget", f"no price for model {self.family.model!r}: a cost budget "
                                               "needs prices=")
            if self.cost + self.held_cost + cost > self.budget.cost:
                return False
        return True

    def hold(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed, cost = self._price(tokens_in, tokens_out)
        self.held_tokens += billed
        self.held_cost += 0.0 if math.isnan(cost) else cost
        self.in_flight += 1
        return billed, 0.0 if math.isnan(cost) else cost

    async def settle(self, held: tuple[float, float], tokens_in: float, tokens_out: float) -> None:
        self.held_tokens -= held[0]
        self.held_cost -= held[1]
        self.in_flight -= 1
        billed, cost = self._price(tokens_in, tokens_out)
        self.tokens += billed
        self.cost += cost
        async with self.changed:
            self.changed.notify_all()


@dataclass
class RunResult:
    """Per distinct request and ask: status, tokens, request ID, error and the answer columns."""

    batch: Batch
    family: Family
    repeats: int
    status: np.ndarray  # (repeats, jobs) int8
    input_tokens: np.ndarray  # (repeats, jobs) float, NaN when unknown
    output_tokens: np.ndarray
    request_id: np.ndarray  # (repeats, jobs) object
    error: np.ndarray  # (repeats, jobs) object
    answers: dict[str, np.ndarray]  # column -> (repeats, jobs)
    summary: RunSummary = field(default_factory=RunSummary)
    failure: BaseException | None = None

    def frame(self, index: pd.Index) -> pd.DataFrame:
        """One row per input row, on `index`: the answer columns, then the meta columns."""
        row_job = self.batch.row_job
        ok_rows = row_job >= 0
        take = np.where(ok_rows, row_job, 0)
        done = (self.status == SENT) | (self.status == CACHED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN means: no successful ask
            per_job = self._combine(done)
        status = per_job.pop("__status")
        row_status = np.where(ok_rows, status[take] if len(status) else ERROR, ERROR)
        text = _STATUS_TEXT[row_status]
        first = np.zeros(len(row_job), dtype=bool)
        if len(status):
            first[np.unique(row_job, return_index=True)[1][np.unique(row_job) >= 0]] = True
        text[(row_status == SENT) & ~first] = "duplicate"
        columns: dict[str, Any] = {}
        for name, values in per_job.items():
            if len(values):
                column = values[take]
            else:
                column = np.full(len(row_job), None if values.dtype == object else np.nan, dtype=values.dtype)
            if column.dtype == object:
                column = column.copy()
                column[~ok_rows] = None
            else:
                column = np.where(ok_rows, column, np.nan)
            if name == "__error":
                for position, message in self.batch.row_errors.items():
                    column[position] = message
            dtype = self.family.columns.get(name, META_COLUMNS.get(name, "float64"))
            columns[name] = _series(column, dtype, index)
        columns["__status"] = _series(text, "str", index)
        return pd.DataFrame(columns, index=index)

    def _combine(self, done: np.ndarray) -> dict[str, np.ndarray]:
        """Per job: answers of repeat 0 (or the mean over repeats), then spreads and meta."""
        out: dict[str, np.ndarray] = {}
        k = self.repeats
        for name, values in self.answers.items():
            if values.dtype == object:
                out[name] = _first_done(values, done)
            else:
                out[name] = np.nanmean(values, axis=0) if k > 1 else values[0]
        if k > 1:
            for name in self.family.columns:
                if name.endswith("__choice"):
                    out[name] = _argmax_choice(name, out, self.family.columns, out[name])
            for name in self.family.spread:
                out[f"{name}__std"] = np.nanstd(self.answers[name], axis=0, ddof=1)
            out["__repeats"] = done.sum(axis=0).astype(float)
        any_done = done.any(axis=0)
        status = np.full(len(any_done), NOT_RUN, dtype=np.int8)
        status[(self.status == ERROR).any(axis=0) & ~any_done] = ERROR
        status[any_done] = CACHED
        status[(self.status == SENT).any(axis=0)] = SENT
        tokens_in = np.where(done, np.nan_to_num(self.input_tokens), 0).sum(axis=0)
        tokens_out = np.where(done, np.nan_to_num(self.output_tokens), 0).sum(axis=0)
        out["__input_tokens"] = np.where(any_done, tokens_in, np.nan)
        out["__output_tokens"] = np.where(any_done, tokens_out, np.nan)
        out["__request_id"] = _first_done(self.request_id, done)
        errors = self.error[0].copy()
        errors[any_done] = None
        out["__error"] = errors
        out["__status"] = status
        return out


def _first_done(values: np.ndarray, done: np.ndarray) -> np.ndarray:
    first = values[0].copy()
    for r in range(1, values.shape[0]):
        fill = ~done[:r].any(axis=0) & done[r]
        first[fill] = values[r][fill]
    return first


def _argmax_choice(name: str, out: dict[str, np.ndarray], columns: Mapping[str, str],
                   fallback: np.ndarray) -> np.ndarray:
    """With repeats, the choice is the option with the highest mean probability."""
    question = name.removesuffix("__choice")
    options = [c for c in columns if c.startswith(f"{question}__p__")]
    if not options:
        return fallback
    probs = np.vstack([out[c] for c in options])
    labels = np.array([c.removeprefix(f"{question}__p__") for c in options], dtype=object)
    best = labels[np.nan_to_num(probs, nan=-1.0).argmax(axis=0)]
    return np.where(np.isnan(probs).all(axis=0), fallback, best)


_STATUS_TEXT = np.array(["not_run", "sent", "cached", "error"], dtype=object)


def _series(values: np.ndarray, dtype: str, index: pd.Index) -> pd.Series:
    if dtype == "Int64":
        return pd.Series(pd.array(np.where(np.isnan(values), None, values).tolist(), dtype="Int64"),
                         index=index)
    if dtype == "str":
        cleaned = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values]
        return pd.Series(pd.array(cleaned, dtype="str"), index=index)
    if dtype == "object":
        return pd.Series(values.astype(object), index=index, dtype=object)
    return pd.Series(values.astype(dtype), index=index)


class Runner:
    """Sends a `Batch` through `send`; one instance per run (it holds the run's counters)."""

    def __init__(self, family: Family, send: Sender, *, concurrency: int = 16,
                 limiter: Limiter | None = None, budget: Budget | None = None,
                 prices: PriceTable | Mapping[str, Any] | None = None, checkpoint: Checkpoint | None = None,
                 refresh: bool = False, repeats: int = 1, pilot: int | None = None, errors: str = "raise",
                 progress: bool = True, max_retries: int = 2,
                 retry_delay: Callable[[BaseException, int], float | None] | None = None,
                 description: str | None = None) -> None:
        if errors not in ("raise", "coerce"):
            raise InvalidRequest("errors", f"must be 'raise' or 'coerce'; got {errors!r}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidRequest("concurrency", f"must be a positive integer; got {concurrency!r}")
        if not isinstance(repeats, int) or repeats < 1:
            raise InvalidRequest("repeats", f"must be a positive integer; got {repeats!r}")
        if budget is not None and family.charges_output and not family.reserved_output:
            raise InvalidRequest("max_tokens", "a budget on a text protocol needs max_tokens, so the "
                                               "output a request may bill is known before it is sent")
        self.family, self.send = family, send
        self.concurrency, self.repeats, self.pilot = concurrency, repeats, pilot
        self.limiter: Limiter = limiter or TokenBucket()
        self.prices = as_table(budget.prices if budget and budget.prices is not None else prices)
        self.budget, self.checkpoint, self.refresh = budget, checkpoint, refresh
        self.errors, self.progress, self.max_retries = errors, progress, max_retries
        self.retry_delay = retry_delay or _retry_rate_limits
        self.description = description or family.name
        self.factor = 1.0  # grows only if an answer ever bills more than its estimate
        self._stopping: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        """Send nothing more; requests in flight finish and are checkpointed. Thread-safe via the loop."""
        self._stopping = self._stopping or reason

    def estimate(self, text: str) -> int:
        """Conservative input tokens of a request whose canonical JSON body is `text`."""
        return math.ceil(len(text.encode()) * self.factor) + 8

    async def run(self, batch: Batch) -> RunResult:
        started = time.perf_counter()
        k, jobs = self.repeats, len(batch)
        result = RunResult(
            batch, self.family, k, np.zeros((k, jobs), np.int8), np.full((k, jobs), np.nan),
            np.full((k, jobs), np.nan), np.full((k, jobs), None, dtype=object),
            np.full((k, jobs), None, dtype=object),
            {name: np.full((k, jobs), None if dtype in ("str", "object") else np.nan,
                           dtype=object if dtype in ("str", "object") else np.float64)
             for name, dtype in self.family.columns.items()})
        spend = _Spend(self.budget, self.prices, self.family)
        bar = _progress(self.progress, len(batch.row_job), self.description)
        remaining = np.full(jobs, k, dtype=np.int64)
        if batch.row_errors:
            bar.update(len(batch.row_errors))
        last_job = jobs if self.pilot is None else _jobs_before(batch, self.pilot)
        items: Iterator[tuple[int, int]] = ((j, r) for j in range(last_job) for r in range(k))
        counters = {"sent": 0, "cached": 0, "rate_limited": 0}

        def finished(job: int) -> None:
            remaining[job] -= 1
            if remaining[job] == 0:
                bar.update(int(batch.rows_per_job[job]))

        async def worker() -> None:
            for job, repeat in items:
                if self._stopping:
                    return
                await self._one(job, repeat, batch, result, spend, counters)
                finished(job)

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, max(1, jobs * k)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            if self.checkpoint is not None:
                self.checkpoint.flush()
            bar.close()
        if self.pilot is not None and last_job < jobs and not self._stopping:
            self._stopping = "pilot"
        result.summary = self._summary(result, spend, counters, time.perf_counter() - started)
        if self._stopping == "pilot":
            result.summary.pilot = self._pilot_estimate(result, last_job)
        return result

    async def _one(self, job: int, repeat: int, batch: Batch, result: RunResult, spend: _Spend,
                   counters: dict[str, int]) -> None:
        family = self.family
        try:
            body = family.body(batch.values[job])
            text = canonical(body)
        except (InvalidRequest, ValueError, TypeError) as exc:
            self._fail(result, job, repeat, exc)
            return
        key = request_key(family.endpoint, body, repeat)
        if self.checkpoint is not None and not self.refresh:
            entry = self.checkpoint.get(key)
            if entry is not None:
                self._store(result, job, repeat, entry.data(), entry.request_id, entry.input_tokens,
                            entry.output_tokens, CACHED)
                counters["cached"] += 1
                return
        estimate = self.estimate(text)
        while not spend.fits(estimate, family.reserved_output):
            if spend.in_flight == 0 or self._stopping:
                self.stop("budget")
                return
            async with spend.changed:
                await spend.changed.wait()
        held = spend.hold(estimate, family.reserved_output)
        tokens_in = tokens_out = 0
        try:
            await self.limiter.acquire(estimate)
            reply = await self._send_with_pauses(body, estimate, counters)
            tokens_in, tokens_out = (t or 0 for t in family.usage(reply.data))
            if tokens_in > estimate:
                self.factor *= tokens_in / estimate
            self.limiter.settle(estimate, tokens_in)
            if self.checkpoint is not None:
                self.checkpoint.put(key, family.endpoint, family.model, reply.text or canonical(reply.data),
                                    reply.request_id, tokens_in, tokens_out)
            self._store(result, job, repeat, reply.data, reply.request_id, tokens_in, tokens_out, SENT)
            counters["sent"] += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.limiter.settle(estimate, 0)
            self._fail(result, job, repeat, exc)
        finally:
            await spend.settle(held, tokens_in, tokens_out)

    async def _send_with_pauses(self, body: dict[str, Any], estimate: int, counters: dict[str, int]) -> Reply:
        """Send, retrying as the client's rules say; a 429 pauses every worker, not only this one."""
        for attempt in itertools.count():
            try:
                return await self.send(self.family.endpoint, body)
            except RateLimited as exc:
                counters["rate_limited"] += 1
                if attempt >= self.max_retries:
                    raise
                wait = self.retry_delay(exc, attempt)
                if wait is None:
                    raise
                self.limiter.pause(wait)
                await self.limiter.acquire(estimate)
            except Exception as exc:
                wait = self.retry_delay(exc, attempt) if attempt < self.max_retries else None
                if wait is None:
                    raise
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    def _store(self, result: RunResult, job: int, repeat: int, data: Any, request_id: str | None,
               tokens_in: int | None, tokens_out: int | None, status: int) -> None:
        record = self.family.record(data)
        for name, values in result.answers.items():
            values[repeat, job] = record.get(name, values[repeat, job])
        result.status[repeat, job] = status
        result.input_tokens[repeat, job] = np.nan if tokens_in is None else tokens_in
        result.output_tokens[repeat, job] = np.nan if tokens_out is None else tokens_out
        result.request_id[repeat, job] = request_id

    def _fail(self, result: RunResult, job: int, repeat: int, exc: BaseException) -> None:
        result.status[repeat, job] = ERROR
        result.error[repeat, job] = f"{type(exc).__name__}: {exc}"
        result.request_id[repeat, job] = getattr(exc, "request_id", None)
        if self.errors == "raise" and result.failure is None:
            result.failure = exc
            self.stop("error")

    def _summary(self, result: RunResult, spend: _Spend, counters: dict[str, int],
                 elapsed: float) -> RunSummary:
        batch = result.batch
        done = (result.status == SENT) | (result.status == CACHED)
        per_job = result._combine(done)["__status"]
        row_status = np.where(batch.row_job >= 0, per_job[np.clip(batch.row_job, 0, None)], ERROR) \
            if len(batch) else np.full(len(batch.row_job), ERROR)
        sent_rows = row_status == SENT
        duplicates = int(sent_rows.sum()) - int((per_job == SENT).sum())
        sent_mask = result.status == SENT
        return RunSummary(
            rows=len(batch.row_job), requests=len(batch) * self.repeats, sent=counters["sent"],
            cached=counters["cached"], duplicate_rows=duplicates, error_rows=int((row_status == ERROR).sum()),
            not_run_rows=int((row_status == NOT_RUN).sum()),
            input_tokens=int(np.nansum(np.where(sent_mask, result.input_tokens, 0))),
            output_tokens=int(np.nansum(np.where(sent_mask, result.output_tokens, 0))),
            cost=spend.cost, elapsed=elapsed, rate_limited=counters["rate_limited"],
            waited=float(getattr(self.limiter, "waited", 0.0)), stopped=self._stopping,
            endpoint=self.family.endpoint, model=self.family.model)

    def _pilot_estimate(self, result: RunResult, first_left: int) -> dict[str, Any]:
        """Tokens and dollars the rows a pilot left out would cost, scaled from the pilot's real counts."""
        batch, family = result.batch, self.family
        sent = result.status == SENT
        estimated = actual_in = actual_out = 0.0
        n_sent = int(sent.sum())
        for r, j in zip(*np.nonzero(sent), strict=True):
            estimated += self.estimate(canonical(family.body(batch.values[j])))
            actual_in += result.input_tokens[r, j]
            actual_out += result.output_tokens[r, j]
        ratio = actual_in / estimated if estimated else 1.0
        out_per_request = actual_out / n_sent if n_sent else float(family.reserved_output)
        keys, texts = [], []
        for j in range(first_left, len(batch)):
            body = family.body(batch.values[j])
            for r in range(self.repeats):
                keys.append(request_key(family.endpoint, body, r))
                texts.append(canonical(body))
        cached = self.checkpoint.has_many(keys) if self.checkpoint is not None and not self.refresh else set()
        left = [self.estimate(t) for key, t in zip(keys, texts, strict=True) if key not in cached]
        tokens_in = sum(left) * ratio
        requests = len(keys) - len(cached)
        tokens_out = out_per_request * requests
        rows = int(batch.rows_per_job[first_left:].sum())
        return {"rows": rows, "requests": requests, "input_tokens": tokens_in, "output_tokens": tokens_out,
                "cost": self.prices.cost(family.model, family.endpoint, tokens_in, tokens_out)}


def _retry_rate_limits(error: BaseException, attempt: int) -> float | None:
    """The rule when none is given: a 429 waits its Retry-After (else 2^attempt s); nothing else retries."""
    if isinstance(error, RateLimited):
        return error.retry_after if error.retry_after is not None else float(2**attempt)
    return None


def _jobs_before(batch: Batch, rows: int) -> int:
    """How many distinct requests the first `rows` rows need (jobs are numbered by first appearance)."""
    head = batch.row_job[:max(0, rows)]
    head = head[head >= 0]
    return int(head.max()) + 1 if len(head) else 0


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(enabled: bool, total: int, description: str) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="row", desc=description, leave=True)
