"""What a cascade did, as typed results: `CascadeSummary` (who answered how many rows, the oracle's calls
and spend, the threshold and what is certified) on the run summary of the frame a cascade returns
(`CascadeRunSummary.cascade`, read as `out.run.cascade`). Built once, when the cascade ends; each is also
read by key (`out.run.cascade["oracle_calls"]["total"]`), as the dicts it replaced were.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from gwlab.frames.cascade.spec import Cascade
from gwlab.frames.run.outcome import ReadByKey, RunSummary
from gwlab.stats.cascade import Threshold
from gwlab.stats.intervals import clopper_pearson

__all__ = ["CascadePilot", "CascadeRunSummary", "CascadeSummary", "OracleCalls", "OracleSpend", "RoutedEstimate"]


@dataclass(frozen=True, slots=True)
class OracleCalls(ReadByKey):
    """Rows the oracle answered: the sample (to set the threshold) and the rows routed to it past it."""

    sampled: int
    routed: int
    total: int


@dataclass(frozen=True, slots=True)
class OracleSpend(ReadByKey):
    """What an oracle spent: requests sent, read from the checkpoint, and their cost (`Oracle.spend`; a Dask
    task ships it back)."""

    name: str
    sent: int
    cached: int
    cost: float


@dataclass(frozen=True, slots=True)
class RoutedEstimate(ReadByKey):
    """What the routed rows should cost, told before they are sent (at the sample's price per request);
    `within_budget`: whether the budget left covers it (None: no budget, or no measured price)."""

    calls: int
    tokens: float
    cost: float
    within_budget: bool | None


@dataclass(frozen=True, slots=True)
class CascadePilot(ReadByKey):
    """From a pilot: what the whole frame's cascade would ask of the oracle (`run.pilot` is the proxy's)."""

    rows: int  # rows the pilot left out
    oracle_calls: float
    routed_share: float
    oracle_cost: float
    all_oracle_calls: int


@dataclass(frozen=True, slots=True)
class CascadeSummary(ReadByKey):
    """Counts over the rows the proxy reached (all, unless a pilot or a budget stopped it), the oracle's
    spend (None on Dask until computed: `sample_oracle` is the sample's), the sample's estimate with its
    bound and interval, and what is certified. docs/guide/cascades.md says what each metric guarantees."""

    metric: str
    target: float
    delta: float
    oracle: str  # what answered: "labels", or the model id (with its family if not decisions)
    threshold: float
    proxy_rows: int
    oracle_rows: int
    oracle_calls: OracleCalls
    oracle_sent: int | None
    oracle_cached: int | None
    all_oracle_calls: int
    saving: float  # all-oracle calls / the cascade's oracle calls
    oracle_cost: float | None
    all_oracle_cost: float | None
    estimate: float
    bound: float
    interval: tuple[float, float]
    certified: bool
    note: str | None
    routed_estimate: RoutedEstimate | None = None
    pilot: CascadePilot | None = None
    sample_oracle: OracleSpend | None = None  # Dask: the sample's spend, known eagerly
    proxy_run: str | None = None  # the cheap model's own run id (`gwlab.run_answers` of it: the proxy alone)

    @classmethod
    def of(cls, cascade: Cascade, threshold: Threshold, reached: int, proxy_rows: int, calls: tuple[int, int],
           oracle: OracleSpend) -> CascadeSummary:
        """The summary of a cascade whose proxy `reached` rows and answered `proxy_rows` of them, and whose
        oracle answered `calls` (sampled, routed) rows, spending what `oracle` counted."""
        (sampled, routed), n = calls, threshold.trials
        total = sampled + routed
        low, high = clopper_pearson(threshold.successes, n, 1 - cascade.delta) if n else (math.nan, math.nan)
        return cls(cascade.metric, cascade.target, cascade.delta, oracle.name, threshold.value, proxy_rows, total,
                   OracleCalls(sampled, routed, total), oracle.sent, oracle.cached, reached,
                   reached / total if total else math.inf, oracle.cost,
                   oracle.cost / total * reached if total else 0.0, threshold.estimate, threshold.bound,
                   (float(low), float(high)), threshold.certified, threshold.note)

    def text(self) -> str:
        calls = self.oracle_calls
        return (f"cascade ({self.metric} >= {self.target} with prob. >= {1 - self.delta:.3g}): proxy answered "
                f"{self.proxy_rows} rows, oracle ({self.oracle}) {self.oracle_rows}; oracle calls {calls.total} "
                f"({calls.sampled} sampled + {calls.routed} routed) vs {self.all_oracle_calls} all-oracle "
                f"({self.saving:.1f}x fewer); threshold {self.threshold:.3f}; " + self._certificate_text()
                + self._budget_text() + self._pilot_text())

    def _certificate_text(self) -> str:
        """What is certified, in words: the bound, or why nothing (or everything, to the oracle) was."""
        if math.isnan(self.bound):
            return f"NOT certified: {self.note}"
        low, high = self.interval
        interval = "" if math.isnan(low) else f" [{low:.3f}, {high:.3f}]"
        estimate = "" if math.isnan(self.estimate) else f" (sample estimate {self.estimate:.3f}{interval})"
        note = f"; {self.note}" if self.note else ""
        return f"certified {self.metric} >= {self.bound:.3f}{estimate}{note}"

    def _budget_text(self) -> str:
        e = self.routed_estimate
        if e is None or e.within_budget is not False:
            return ""
        spend = "no price measured" if math.isnan(e.tokens) else f"~{e.tokens:.0f} tokens"
        return (f"\ncascade: the {e.calls} routed rows ({spend}) are over the budget left: the oracle answered "
                "those it could pay for, the rest are missing")

    def _pilot_text(self) -> str:
        p = self.pilot
        if p is None:
            return ""
        return (f"\ncascade pilot: the whole frame would call the oracle about {p.oracle_calls:.0f} times "
                f"of {p.all_oracle_calls} (routed share {p.routed_share:.2f}), est. ${p.oracle_cost:.4f}")


@dataclass
class CascadeRunSummary(RunSummary):
    """The proxy's run summary and the cascade's (`cascade`): what `df.gw.decide(..., cascade=)` returns."""

    cascade: CascadeSummary | None = None

    @classmethod
    def of(cls, run: RunSummary, cascade: CascadeSummary) -> CascadeRunSummary:
        return cls(**{f.name: getattr(run, f.name) for f in fields(RunSummary)}, cascade=cascade)

    def notes(self) -> list[str]:
        return [*super().notes(), *([self.cascade.text()] if self.cascade is not None else [])]
