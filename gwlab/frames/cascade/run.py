"""`df.gw.decide(..., cascade=...)`: the cheap model's run, the oracle's sample, the threshold, the rest.

Every model call is an ordinary `df.gw.decide` run on a slice of the frame, so checkpoints, errors and
the request log behave as everywhere else, and a resumed cascade pays nothing twice (its sample is seeded
and the proxy's answers are checkpointed, so the same rows reach the oracle again, from the checkpoint).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import _client
from gwlab.frames import columns as tidy
from gwlab.frames.cascade.oracle import CascadeQuestion, Oracle
from gwlab.frames.cascade.spec import Cascade, Threshold, choose_threshold, proxy_answers, sample_rows
from gwlab.frames.cascade.summary import CascadePilot, CascadeRunSummary, CascadeSummary
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.records import Derived, record_derived
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.run.status import RowStatus
from gwlab.frames.specs import DecideSpec
from gwlab.frames.store.stores import open_for_run

__all__ = [
    "CASCADE_COLUMNS",
    "PROXY",
    "delivered_columns",
    "final_answers",
    "pilot_estimate",
    "proxy_columns",
    "run_cascade",
    "sample_positions",
    "threshold_for",
    "with_cascade_columns",
]


async def run_cascade(frame: pd.DataFrame, asked: DecideSpec, cascade: Cascade, config: RunConfig) -> BatchFrame:
    """The cascade of `df.gw.adecide(..., cascade=cascade)` (`asked`: the proxy's request): see
    docs/guide/cascades.md. Its frame's `.run` is a `CascadeRunSummary`: the proxy's run and `.cascade`."""
    if not isinstance(cascade, Cascade):
        raise InvalidRequest("cascade", f"a gwlab.Cascade; got {type(cascade).__name__}")
    question = CascadeQuestion.of(asked.questions, cascade)
    _check_names(frame, question, config)
    oracle = Oracle.of(frame, asked, question, cascade, config)
    started = time.perf_counter()
    with _client.run_tag(None, "cascade") as label:  # every call of the cascade carries its one id
        proxy = await asked.run(frame, config)
        out = await _cascade(frame, proxy, question, oracle, config)
    return _record(proxy, out, oracle, config, (label, time.perf_counter() - started))


async def _cascade(frame: pd.DataFrame, proxy: BatchFrame, question: CascadeQuestion, oracle: Oracle,
                   config: RunConfig) -> BatchFrame:
    """From the cheap model's run: the sample, the threshold, the routed rows, the delivered frame."""
    cascade = oracle.cascade
    oracle.spent(proxy.run, counted=False)
    columns = proxy_columns(proxy, frame, config)
    score, mine = question.score(columns, cascade.metric), question.answers(columns)
    valid, sampled = sample_positions(score, cascade)
    asked_rows = np.unique(sampled)
    said_by_row = dict(zip(asked_rows.tolist(), await oracle.answer(asked_rows), strict=True))
    threshold, answered = threshold_for(score, mine, (valid, sampled), said_by_row, cascade)
    reached = columns["__status"].to_numpy() != RowStatus.NOT_RUN.label  # a pilot or a budget stops short
    routed = np.flatnonzero(reached & ~answered & ~np.isin(np.arange(len(frame)), asked_rows))
    before = oracle.estimate(len(routed))  # the runner then checks each request against the budget left
    said_by_row.update(zip(routed.tolist(), await oracle.answer(routed), strict=True))
    final = final_answers(mine, answered, said_by_row, cascade.metric)
    out = with_cascade_columns(proxy, question, config.output.prefix, final, answered, score, reached,
                               frame.columns if config.output.join else ())
    calls = (len(asked_rows), len(routed))
    pilot = pilot_estimate(cascade, reached, *calls, oracle) if proxy.run.pilot is not None else None
    counts = CascadeSummary.of(cascade, threshold, int(reached.sum()), int(answered.sum()), calls, oracle.spend)
    summary = dataclasses.replace(counts, routed_estimate=before, pilot=pilot)
    return BatchFrame.wrap(out, CascadeRunSummary.of(proxy.run, summary))


def _record(proxy: BatchFrame, out: BatchFrame, oracle: Oracle, config: RunConfig,
            tag: tuple[_client.RunLabel, float]) -> BatchFrame:
    """The cascade's own run record, so `gwlab.run_answers(out.run.run_id)` reads the delivered answers
    back (the cheap model's run keeps its record: `.run.cascade.proxy_run`). Its counts add the oracle's
    requests to the cheap model's; `.run`'s own counts stay the cheap model's."""
    (label, elapsed), run = tag, out.run
    assert isinstance(run, CascadeRunSummary)
    base, c = proxy.run.run_id, run.cascade
    assert c is not None and base is not None, "a cascade's summary and its cheap model's run record"
    renamed = {a: b for a, b in zip(proxy.columns, out.columns[:len(proxy.columns)], strict=True) if a != b}
    kept = set(renamed.values()) | set(proxy.columns)
    added = out[[col for col in out.columns if col not in kept or col in renamed]]
    facts = {"sent": run.sent + oracle.sent, "cached": run.cached + oracle.cached,
             "input_tokens": run.input_tokens + oracle.input_tokens,
             "output_tokens": run.output_tokens + oracle.output_tokens, "cost": _sum_cost(run.cost, oracle.cost),
             "duration": elapsed, "cascade": {"oracle": c.oracle, "metric": c.metric, "target": c.target,
                                              "delta": c.delta, "certified": c.certified,
                                              "oracle_calls": c.oracle_calls.total}}
    store, owned = open_for_run(config.store.checkpoint)
    told = SimpleNamespace(elapsed=elapsed, run_id=None, recorded=None)
    try:
        record_derived(store, told, Derived(base, renamed, added.set_axis(range(len(out))), facts), label)
    finally:
        if owned and store is not None:
            store.close()
    run.run_id, run.recorded = told.run_id, told.recorded
    run.cascade = dataclasses.replace(c, proxy_run=base)
    return out


def _sum_cost(proxy: float, oracle: float) -> float | None:
    total = proxy + oracle
    return None if math.isnan(total) else total


CASCADE_COLUMNS = tuple(tidy.SEP + field for field in (tidy.ANSWER, tidy.SOURCE, tidy.PROXY_SCORE))  # suffixes


def _check_names(frame: pd.DataFrame, question: CascadeQuestion, config: RunConfig) -> None:
    """Refuse a clash with the frame's columns before anything is sent (as the accessor does for its own)."""
    tidy.refuse_clash(frame.columns, [f"{question.name}{suffix}" for suffix in CASCADE_COLUMNS],
                      prefix=config.output.prefix, join=config.output.join)


def proxy_columns(proxy: pd.DataFrame, frame: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """The proxy run's own columns (not the frame's), named without the run's prefix."""
    columns = proxy.iloc[:, len(frame.columns):] if config.output.join else proxy
    return columns.rename(columns=lambda c: c.removeprefix(config.output.prefix))


def sample_positions(score: np.ndarray, cascade: Cascade) -> tuple[np.ndarray, np.ndarray]:
    """The rows the proxy answered (`valid`; a row it failed on goes to the oracle, a row it never reached
    has no score either) and, among them, the
    seeded sample's positions for the oracle (recall's may repeat)."""
    valid = np.flatnonzero(~np.isnan(score))
    return valid, valid[sample_rows(score[valid], cascade)]


def threshold_for(score: np.ndarray, mine: np.ndarray, drawn: tuple[np.ndarray, np.ndarray],
                  said_by_row: Mapping[int, Any], cascade: Cascade) -> tuple[Threshold, np.ndarray]:
    """From the oracle's answers on the sample (`drawn`: `sample_positions`' pair), the threshold and, per
    row, whether the proxy answers it (never a sampled row: the oracle has answered those)."""
    valid, sampled = drawn
    kept = sampled[[said_by_row[p] is not None for p in sampled]]  # an unanswered one says nothing
    hits = np.array([_hit(mine[p], said_by_row[p], cascade.metric) for p in kept], dtype=bool)
    threshold = choose_threshold(score[valid], np.searchsorted(valid, kept), hits, cascade)
    answered = np.zeros(len(score), dtype=bool)
    answered[valid] = proxy_answers(score[valid], threshold, cascade.metric)
    answered[sampled] = False
    return threshold, answered


def _hit(mine: Any, said: Any, metric: str) -> bool:
    """For a sampled row: was the proxy right (accuracy), or does the oracle say true (precision/recall)."""
    return bool(said is True) if metric != "accuracy" else (said is not None and mine == said)


def final_answers(mine: np.ndarray, answered: np.ndarray, said: Mapping[int, Any], metric: str) -> np.ndarray:
    """Per row, the cascade's answer: the proxy's (as the metric lets it answer) or the oracle's (`said`)."""
    out = np.empty(len(mine), dtype=object)
    proxy_says = {"accuracy": None, "precision": True, "recall": False}[metric]
    for position in range(len(mine)):
        if answered[position]:
            out[position] = mine[position] if proxy_says is None else proxy_says
        else:
            out[position] = said.get(position)
    return out


PROXY = "__proxy"  # the cheap model's own columns of the cascaded question: {q}__proxy__noul, __proxy__p__{option}, ...


def with_cascade_columns(proxy: pd.DataFrame, question: CascadeQuestion, prefix: str, final: np.ndarray,
                         answered: np.ndarray, score: np.ndarray, reached: np.ndarray | None = None,
                         given: Iterable[Any] = ()) -> pd.DataFrame:
    """The delivered frame: the question's own columns hold the cascade's answers, the cheap model's are
    kept as `{q}__proxy__*`, and `CASCADE_COLUMNS` are added; a row the proxy never `reached` (a
    pilot's, a budget's: None means every row) has no source; the frame's own columns (`given`, joined
    in front) are never renamed. See docs/guide/cascades.md, "Columns"."""
    own, given = f"{prefix}{question.name}__", set(given)
    mine = [c for c in proxy.columns if str(c).startswith(own) and c not in given]
    out = pd.DataFrame(proxy).rename(columns={c: f"{prefix}{question.name}{PROXY}__{c[len(own):]}" for c in mine})
    options = [c[len(own) + 3:] for c in mine if c.startswith(f"{own}p__") and not c.endswith("__std")]
    for name, values in delivered_columns(question, final, options).items():
        out[f"{own}{name}"] = values
    answer, source, proxy_score = (f"{prefix}{question.name}{suffix}" for suffix in CASCADE_COLUMNS)
    out[answer] = pd.array(final, dtype="boolean") if question.kind == "noul" else final
    reached = np.ones(len(answered), dtype=bool) if reached is None else reached
    out[source] = np.where(answered, "proxy", np.where(reached, "oracle", None))  # type: ignore[call-overload]  # numpy stubs: None is a valid scalar here
    out[proxy_score] = score
    return out


def delivered_columns(question: CascadeQuestion, final: np.ndarray, options: list[str]) -> dict[str, Any]:
    """The delivered answers under the question's own column names, as `gwlab.evaluate` reads them: a
    noul's P(true) is 1.0 or 0.0; a choice's or a score's probabilities are one-hot on the delivered
    option or level (the delivered answer is an answer, not a probability: its calibration is that of
    hard answers); missing stays missing."""
    missing = np.array([v is None for v in final], dtype=bool)
    if question.kind == "noul":
        return {"noul": np.where(missing, np.nan, [float(bool(v)) if v is not None else 0.0 for v in final])}
    names = np.array(["" if v is None else str(v) for v in final], dtype=object)
    out: dict[str, Any] = {}
    if question.kind == "score":
        levels = pd.array([None if v is None else int(v) for v in final], dtype="Int64")
        out["score"] = np.array([np.nan if v is None else float(int(v)) for v in final], dtype=float)
        out["level"] = levels
    else:
        out["choice"] = pd.array([None if v is None else str(v) for v in final], dtype="str")
    for option in options:
        out[f"p__{option}"] = np.where(missing, np.nan, (names == option).astype(float))
    return out


def pilot_estimate(cascade: Cascade, reached: np.ndarray, sampled: int, routed: int, oracle: Oracle
                   ) -> CascadePilot:
    """What the whole frame's cascade would ask of the oracle, from a pilot over its first rows: the
    sample (`cascade.sample` rows at most) plus the share of the pilot's other rows it routed; priced at
    the pilot's oracle cost per call (0 for labels). The proxy's own estimate is `run.pilot`."""
    n, ran = len(reached), int(reached.sum())
    share = routed / (ran - sampled) if ran > sampled else 1.0
    calls = min(cascade.sample, n) + share * max(0, n - min(cascade.sample, n))
    per_call = oracle.cost / oracle.sent if oracle.sent else 0.0
    return CascadePilot(n - ran, calls, share, calls * per_call, n)
