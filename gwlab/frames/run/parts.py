"""The typed parts of a run's summary, each built where it is computed and each with its own summary line:
a pilot's estimate (the runner's; a batch run's, `frames/batch/pilot.py`), the rows over the input limit
(`OverLimit.report`, `frames/run/budget.py`), where cached answers came from (the runner), and what batch
jobs did (`BatchPhase.summary`, `frames/batch/jobs.py`). `RunSummary` (`outcome.py`) holds them; each is
also read by key (`out.run.pilot["cost"]`), as the dicts it replaced were. Kept apart so that the modules
that build them and the summary that holds them import one place, never each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Protocol

from gwlab.wire.jobs.batches import WINDOW_SECONDS

__all__ = ["BatchEstimate", "BatchPilotEstimate", "BatchSummary", "CachedFrom", "OverLimitReport",
           "PilotEstimate", "ReadByKey", "SummaryPart"]


class ReadByKey:
    """A typed result (a dataclass) also read by key, as the dicts it replaced were: `summary["threshold"]`,
    `summary.get("note")`, `dict(summary)`; an unknown key is a KeyError. The attributes are the API."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.keys() else default

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]  # type: ignore[arg-type]

    def __contains__(self, key: object) -> bool:
        return key in self.keys()


@dataclass(frozen=True, slots=True)
class PilotEstimate(ReadByKey):
    """`.run.pilot`: what the rows a pilot left out would cost, scaled from the pilot's real counts (the
    runner's; a batch run's adds its jobs and time, `frames/batch/pilot.py`)."""

    rows: int  # rows the pilot left out
    requests: int  # the requests they need (answers the checkpoint holds not counted)
    input_tokens: float
    output_tokens: float
    cost: float

    def text(self) -> str:
        rest_cost = "n/a" if math.isnan(self.cost) else f"${self.cost:.4f}"
        return (f"pilot: the other {self.rows} rows need {self.requests} requests, "
                f"about {self.input_tokens:.0f} in / {self.output_tokens:.0f} out tokens, est. {rest_cost}")


@dataclass(frozen=True, slots=True)
class CachedFrom(ReadByKey):
    """`.run.cached_from`: where and when the answers served from the checkpoint were given (UTC ISO times)."""

    gateway: str
    answers: int
    first_answered: str | None
    last_answered: str | None

    def text(self) -> str:
        when = self.first_answered if self.first_answered == self.last_answered else \
            f"between {self.first_answered} and {self.last_answered}"
        return f"cached: {self.answers} answers given by {self.gateway or 'this gateway'} {when}"


class SummaryPart(Protocol):
    """A typed part of a run's summary that has its own line (pilot, over the limit, cached, batch jobs)."""

    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class OverLimitReport(ReadByKey):
    """`.run.over_limit`: how many rows look over the model's input limit, and the first 20 (their labels and
    estimated tokens), found before anything was sent."""

    model: str
    limit: int
    count: int
    rows: list[Any]
    estimated_tokens: list[int]

    def text(self) -> str:
        if not self.count:
            return ""
        rows = ", ".join(map(repr, self.rows)) + (", ..." if self.count > len(self.rows) else "")
        return (f"over the input limit: {self.count} rows look longer than {self.model}'s {self.limit} "
                f"tokens (rows {rows}): the gateway refuses them")


@dataclass(frozen=True, slots=True)
class BatchEstimate(ReadByKey):
    """With a budget: what the submitted requests may cost at most (input: their bytes; output: max_tokens)."""

    requests: int
    tokens: float
    cost: float


@dataclass(frozen=True, slots=True)
class BatchSummary(ReadByKey):
    """`.run.batch`: the jobs, what this call submitted and collected, the jobs' row counts, what they billed,
    and how many rows are still pending (wait=False or a timeout: run the same call again to collect)."""

    api: str
    jobs: list[str | None]  # the job ids (None: a submission in doubt, not yet found)
    submitted: int
    collected: int
    counts: dict[str, int]
    cost: float
    input_tokens: int
    output_tokens: int
    pending: int
    stopped: str | None
    estimate: BatchEstimate | None

    def text(self) -> str:
        pending = f", {self.pending} rows pending: run the same call again to collect" if self.pending else ""
        return (f"batch ({self.api}): {len(self.jobs)} job(s), {self.submitted} requests submitted and "
                f"{self.collected} answers collected by this call{pending}")


@dataclass(frozen=True, slots=True)
class BatchPilotEstimate(PilotEstimate):
    """`.run.pilot` of a batch run: the runner's estimate at the batch price, the jobs the rest would make,
    the seconds they may take, the pilot jobs' turnaround (None: not observed) and the provider's window."""

    jobs: int = 0
    seconds: float = 0.0
    turnaround_s: float | None = None
    window_s: float = float(WINDOW_SECONDS)
    batch: bool = True  # told apart from a synchronous pilot's estimate by key, as the dict it replaced was

    def text(self) -> str:
        over = self.seconds > self.window_s
        return (PilotEstimate.text(self)
                + f" at the batch price, in {self.jobs} job(s) taking about {self.seconds:.0f} s"
                + (f" (past the {self.window_s:.0f} s window: expect expiry part-way)" if over
                   else f" (window {self.window_s:.0f} s)"))
