"""What calls cost: a configurable price table and `gw.usage` summed by run, model and endpoint.

Prices are per million tokens, per model (exact ID or a glob such as `local/*`). Decisions charge input
tokens only (spec, Decision response rule 2), whatever the table says about output; every other
endpoint charges both. A model missing from the table costs NaN, not 0: an unknown price is unknown,
and a group holding such a call costs NaN too (a partial sum would be a silently wrong total). A call
that used no tokens costs 0 whatever its model.

Some calls have no model (`gw.models()` is `GET /models`). They are kept and grouped under
`NO_MODEL`, never dropped from the counts: the number of requests must add up to the ledger's rows.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.wire.families import by_path
from gwlab.wire.jobs.batches import LEDGER_FAMILY

__all__ = ["DEFAULT_PRICES", "NO_MODEL", "Price", "PriceTable", "charges_output", "column", "model_ids",
           "summarize"]

NO_MODEL = "(no model)"  # the group of calls that name no model, such as GET /models

# names the client's ledger frame may use for each fact, first match wins
ALIASES: dict[str, tuple[str, ...]] = {
    "time": ("time", "ts", "timestamp", "started_at", "started"),
    "endpoint": ("endpoint", "path"),
    "model": ("model",),
    "run": ("run",),
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
    "latency_ms": ("latency_ms",),
    "latency_s": ("latency_s", "latency", "elapsed"),
    "status": ("status",),
    "family": ("family",),
}


BATCH_SHARE = 0.5  # what a batch job pays of the synchronous price, unless a model's price says otherwise


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens; `batch` is the share of it a provider batch job pays (half, as
    OpenAI's Batch API and Anthropic's Message Batches charge)."""

    input: float
    output: float = 0.0
    batch: float = BATCH_SHARE


def charges_output(endpoint: str | None) -> bool:
    """False for decisions: only their input tokens are charged (the family's row says so)."""
    family = by_path((endpoint or "").rstrip("/"))
    return family.charges_output if family is not None else True


class PriceTable:
    """Model -> `Price`; keys may be globs (`local/*`). Exact IDs win over globs, longer globs first."""

    def __init__(self, prices: Mapping[str, Price | Mapping[str, float] | tuple[float, ...] | float]
                 | None = None) -> None:
        self._prices = {model: _price(model, p) for model, p in (prices or {}).items()}

    def price(self, model: str | None) -> Price | None:
        if not isinstance(model, str):  # None, or the NaN a frame holds for a call without a model
            return None
        if model in self._prices:
            return self._prices[model]
        for pattern in sorted(self._prices, key=len, reverse=True):
            if fnmatch.fnmatchcase(model, pattern):
                return self._prices[pattern]
        return None

    def cost(self, model: str | None, endpoint: str | None, input_tokens: float,
             output_tokens: float = 0.0, *, batch: bool = False) -> float:
        """Dollars for one call (or a sum of calls); NaN when the model has no price; 0 with no tokens.
        `batch`: sent in a provider batch job, at the model's batch rate."""
        billed_out = output_tokens if charges_output(endpoint) else 0.0
        if not input_tokens and not billed_out:
            return 0.0
        price = self.price(model)
        if price is None:
            return float("nan")
        share = price.batch if batch else 1.0
        return share * (input_tokens * price.input + (billed_out or 0.0) * price.output) / 1e6

    def __or__(self, other: PriceTable | Mapping[str, Any]) -> PriceTable:
        merged = PriceTable()
        merged._prices = {**self._prices, **as_table(other)._prices}
        return merged

    def __repr__(self) -> str:
        return f"PriceTable({ {m: (p.input, p.output) for m, p in self._prices.items()} })"


def _price(model: str, value: Any) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, int | float):
        return Price(float(value))
    if isinstance(value, Mapping):
        return Price(float(value.get("input", 0.0)), float(value.get("output", 0.0)),
                     float(value.get("batch", BATCH_SHARE)))
    if isinstance(value, tuple | list) and 1 <= len(value) <= 2:
        return Price(*map(float, value))
    raise InvalidRequest(f"prices.{model}", "a price is dollars per million tokens: a number, "
                                            "(input, output) or {'input': .., 'output': ..}")


# The embedded gateway's models run on this machine: they cost nothing. Hosted models have no default:
# pass your provider's prices (`prices={"vendor/model": {"input": 0.15, "output": 0.60}}`).
DEFAULT_PRICES = PriceTable({"local/*": Price(0.0, 0.0)})


def as_table(prices: PriceTable | Mapping[str, Any] | None) -> PriceTable:
    """`prices` merged over the defaults."""
    if prices is None:
        return DEFAULT_PRICES
    return prices if isinstance(prices, PriceTable) else DEFAULT_PRICES | PriceTable(prices)


@overload
def column(frame: pd.DataFrame, fact: str, *, required: Literal[True] = True) -> pd.Series: ...


@overload
def column(frame: pd.DataFrame, fact: str, *, required: bool) -> pd.Series | None: ...


def column(frame: pd.DataFrame, fact: str, *, required: bool = True) -> pd.Series | None:
    """The column holding `fact` (see ALIASES), whatever name the ledger gave it."""
    for name in ALIASES.get(fact, (fact,)):
        if name in frame.columns:
            return frame[name]
    if fact == "latency_ms":
        seconds = column(frame, "latency_s", required=False)
        if seconds is not None:
            return pd.to_numeric(seconds, errors="coerce") * 1000.0
    if fact == "time" and isinstance(frame.index, pd.DatetimeIndex):
        return frame.index.to_series()
    if required:
        raise InvalidRequest(fact, f"the usage frame has no {fact} column (looked for {ALIASES.get(fact)})")
    return None


def summarize(usage: pd.DataFrame | Any, prices: PriceTable | Mapping[str, Any] | None = None,
              by: Iterable[str] = ("run", "model", "endpoint")) -> pd.DataFrame:
    """Requests, errors, tokens, billed tokens, cost and latency per group of the usage ledger.

    Parameters
    ----------
    usage : DataFrame or Gateway
        The ledger as a frame (``gw.usage``), or a gateway whose ``usage`` is read.
    prices : PriceTable or dict, optional
        Dollars per million tokens per model, merged over `DEFAULT_PRICES` (local models free).
    by : iterable of str
        Grouping facts among run, model, endpoint; missing ones are skipped.

    Returns
    -------
    DataFrame
        One row per group: ``requests``, ``errors``, ``input_tokens``, ``output_tokens``,
        ``billed_tokens`` (decisions: input only), ``cost`` and ``latency_ms_p50``/``p95``.
    """
    frame = usage if isinstance(usage, pd.DataFrame) else getattr(usage, "usage", None)
    if callable(frame):
        frame = frame()
    if not isinstance(frame, pd.DataFrame):
        raise InvalidRequest("usage", "expected the usage ledger as a DataFrame, or a gateway")
    table = as_table(prices)
    facts = {f: column(frame, f, required=False) for f in ("run", "model", "endpoint")}
    work = pd.DataFrame(index=range(len(frame)))
    for fact, series in facts.items():
        work[fact] = series.to_numpy() if series is not None else None
    work["model"] = model_ids(facts["model"], len(frame))
    work["input_tokens"] = _numbers(column(frame, "input_tokens", required=False), len(frame))
    work["output_tokens"] = _numbers(column(frame, "output_tokens", required=False), len(frame))
    status = column(frame, "status", required=False)
    work["errors"] = (_numbers(status, len(frame)) >= 400).astype(int) if status is not None else 0
    latency = column(frame, "latency_ms", required=False)
    work["latency_ms"] = _numbers(latency, len(frame), fill=None)
    out_charged = work["endpoint"].map(lambda e: charges_output(e) if isinstance(e, str) else True)
    work["billed_tokens"] = work["input_tokens"] + work["output_tokens"].where(out_charged, 0.0)
    family = column(frame, "family", required=False)
    batched = (family == LEDGER_FAMILY).to_numpy() if family is not None else [False] * len(frame)
    work["cost"] = [table.cost(m, e, i, o, batch=bool(b)) for m, e, i, o, b in zip(
        work["model"], work["endpoint"], work["input_tokens"], work["output_tokens"], batched, strict=True)]
    keys = [k for k in by if k in work.columns and work[k].notna().any()]
    labels = {k: NO_MODEL if k == "model" else "" for k in keys}
    grouped = work.fillna(labels).groupby(keys, sort=True, dropna=False) if keys else None
    aggregations = {"requests": ("input_tokens", "size"), "errors": ("errors", "sum"),
                    "input_tokens": ("input_tokens", "sum"), "output_tokens": ("output_tokens", "sum"),
                    "billed_tokens": ("billed_tokens", "sum"),
                    "cost": ("cost", lambda c: c.sum(skipna=False)),  # one unknown price: unknown
                    "latency_ms_p50": ("latency_ms", "median"),
                    "latency_ms_p95": ("latency_ms", lambda s: s.quantile(0.95))}
    if grouped is None:
        return work.assign(_all="all").groupby("_all").agg(**aggregations)
    return grouped.agg(**aggregations)


def model_ids(series: pd.Series | None, n: int) -> list[str | None]:
    """Each row's model ID, None where the call named none (the ledger may hold None or NaN there)."""
    if series is None:
        return [None] * n
    return [m if isinstance(m, str) and m else None for m in series.to_numpy()]


def _numbers(series: pd.Series | None, n: int, fill: float | None = 0.0) -> pd.Series:
    if series is None:
        return pd.Series(np.full(n, np.nan if fill is None else fill), dtype=float)
    numbers = pd.to_numeric(pd.Series(series.to_numpy()), errors="coerce").astype(float)
    return numbers if fill is None else numbers.fillna(fill)
