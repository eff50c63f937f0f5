"""What every operator shares: its summary over all its runs, its result frame, the checks of its
arguments, its rows' texts and the budget its next run may spend.

Each operator (one module each: filter, merge, topk, aggregate) turns a question about many rows into
ordinary `df.gw` runs (decisions for the row-level questions, a text family for `aggregate`), so every
request is deduplicated, checkpointed, budgeted and piloted exactly as a `decide` or `chat` run is; a
resumed operator asks the checkpoint first and pays nothing twice. What an operator did, over all its
runs, is one `OperatorSummary` on the result's `.run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.run.budget import Budget, input_text
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.templates import Template

__all__ = ["OperatorFrame", "OperatorSummary", "check_text", "check_threshold", "finish", "inner", "next_run",
           "remaining", "texts"]


@dataclass
class OperatorSummary:
    """What an operator's runs did together: requests, cache hits, tokens, and its own counts."""

    operator: str
    rows: int = 0
    requests: int = 0  # distinct requests of every run (sent + cached + not run)
    sent: int = 0
    cached: int = 0
    error_rows: int = 0
    not_run_rows: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    comparisons: int = 0  # topk: pairwise comparisons asked
    levels: int = 0  # aggregate: map-reduce levels run
    strategy: str = ""  # merge: "choice" or "pairwise"
    kept: int | None = None  # filter: rows that passed
    stopped: str | None = None
    runs: list[RunSummary] = field(default_factory=list)  # each run's summary (read by key too)

    def add(self, summary: RunSummary) -> None:
        """Count one run of the operator in."""
        self.requests += summary.requests
        self.sent += summary.sent
        self.cached += summary.cached
        self.error_rows += summary.error_rows
        self.not_run_rows += summary.not_run_rows
        self.input_tokens += summary.input_tokens
        self.output_tokens += summary.output_tokens
        self.stopped = self.stopped or summary.stopped
        self.runs.append(summary)

    def text(self) -> str:
        extra = {"comparisons": self.comparisons, "levels": self.levels}
        shown = "".join(f", {value} {name}" for name, value in extra.items() if value)
        strategy = f" ({self.strategy})" if self.strategy else ""
        kept = f", kept {self.kept} of {self.rows}" if self.kept is not None else ""
        line = (f"{self.operator}{strategy}: {self.rows} rows{kept}, {self.requests} requests in "
                f"{len(self.runs)} runs: "
                f"{self.sent} sent, {self.cached} cached{shown} · {self.input_tokens} in / {self.output_tokens} "
                "out tokens")
        return line + (f" · stopped: {self.stopped}" if self.stopped else "")


class OperatorFrame(BatchFrame):
    """An operator's result: `.run` is its `OperatorSummary`; `.answers` the row answers it chose from."""

    _metadata: ClassVar[list[str]] = ["run", "answers"]
    answers: pd.DataFrame | None

    @classmethod
    def of(cls, frame: pd.DataFrame, summary: OperatorSummary, answers: pd.DataFrame | None = None
           ) -> OperatorFrame:
        out = cls.wrap(frame, summary)  # type: ignore[arg-type]  # an operator's summary in a RunSummary's place
        out.answers = answers
        return out


def check_threshold(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidRequest(name, f"threshold must be a probability between 0 and 1; got {value!r}")


def check_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(name, f"must be a non-empty text; got {value!r}")
    return value


def inner(config: RunConfig) -> RunConfig:
    """The config of the operator's own runs: the operator's (checked once, at the accessor's door), but
    their frames are the operator's to shape (no join, no prefix: `finish` applies the caller's)."""
    return config.but(join=False, prefix="")


def texts(frame: pd.DataFrame, spec: Any, field_name: str, blank: str) -> tuple[list[str | None], dict[int, str]]:
    """Each row's text under a template (default: every column, as a JSON object); failures by position."""
    template = Template.parse(list(frame.columns) if spec is None else spec, frame.columns, field=field_name)
    rows = template.rows(frame, blank=blank)
    out = [None if code < 0 else input_text(rows.value(int(code))) for code in rows.codes]
    return out, dict(rows.errors)


def finish(frame: pd.DataFrame, added: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """The operator's columns (prefixed), after the input columns unless join=False."""
    tidy.refuse_clash(frame.columns, map(str, added.columns), prefix=config.output.prefix, join=config.output.join)
    added = added.rename(columns=lambda c: f"{config.output.prefix}{c}")
    if not config.output.join:
        return added
    return pd.concat([frame, added.set_axis(frame.index)], axis=1)


def remaining(budget: int | Budget | None, spent: OperatorSummary) -> int | Budget | None:
    """What is left of a token budget after the operator's runs so far, for its next run (a Budget with a
    cost is passed on as it is: each run checks it against its own spend)."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        return max(0, budget - spent.input_tokens - spent.output_tokens)
    return budget


def next_run(config: RunConfig, spent: OperatorSummary) -> RunConfig:
    """The config of the operator's next run: its budget is what the earlier runs left."""
    return config if config.spending.budget is None else config.but(budget=remaining(config.spending.budget, spent))
