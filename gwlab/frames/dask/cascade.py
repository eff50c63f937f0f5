"""`gw_dask.decide(ddf, ..., cascade=gwlab.Cascade(...))`: a cascade over a dask DataFrame.

The data flows one way, and the shared checkpoint is what keeps it from paying twice:

1. A checkpoint (a path or a ``postgresql://`` URL) is required, and `checkpoint=None` is refused before
   anything is sent: the proxy's answers are computed once to set the threshold and read again from it
   when the frame is computed.
2. Eagerly, in `decide`: the proxy runs over every partition (as `gw_dask.decide` does) and only a score
   and an answer per row come back to the client. The seeded sample is drawn there as on pandas
   (`sample_positions`); the sampled rows are fetched from the ddf and answered in one dask task by the
   same `Oracle` pandas uses (labels, a decision model, or a text model), through the shared checkpoint
   and limit; then `threshold_for` sets the threshold.
3. Lazily: each partition re-runs the proxy (checkpoint hits), lets it answer the rows on its side of
   the threshold (a scalar by now), puts the sample's oracle answers (a small dict) and asks the oracle
   for the partition's routed rows, through the same checkpoint: a recompute pays nothing twice.
4. The returned frame is a `CascadeDataFrame` (a dask DataFrame) whose ``.cascade`` is the typed
   `CascadeSummary` known eagerly, as pandas' ``.run.cascade`` (threshold, rows per side, oracle calls,
   saving, estimate, bound, interval), with the oracle's spend on the routed rows unknown until
   `compute()`: ``oracle_sent``, ``oracle_cached``, ``oracle_cost`` and ``all_oracle_cost`` are None and
   ``sample_oracle`` gives the sample's spend. Derived frames (a column selection, a filter) are plain
   dask frames without it: read it from the frame `decide` returned.

A row the proxy failed on when the threshold was set goes to the oracle on pandas; here a failure is not
checkpointed, so a partition that computes it again and gets an answer judges it by the threshold like
any other row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.frames import _client, recipes
from gwlab.frames.cascade.oracle import CascadeQuestion, Oracle
from gwlab.frames.cascade.run import (
    CASCADE_COLUMNS,
    final_answers,
    proxy_columns,
    sample_positions,
    threshold_for,
    with_cascade_columns,
)
from gwlab.frames.cascade.spec import Cascade, Threshold, proxy_answers
from gwlab.frames.cascade.summary import CascadeSummary, OracleSpend
from gwlab.frames.dask.partitions import DaskSetup, WorkerRun, checked_run
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.specs import DecideSpec

__all__ = ["CascadeJob", "cascade_decide", "cascade_frame", "cascade_partition"]


@dataclass(frozen=True)
class CascadeJob:
    """What each partition needs: the run, the cascade, and what the client learnt (threshold, sample)."""

    asked: DecideSpec  # the proxy's request
    cascade: Cascade
    question: CascadeQuestion
    threshold: Threshold | None = None
    said: Mapping[int, Any] = field(default_factory=dict)  # the sample's oracle answers by global position
    offsets: tuple[int, ...] = ()  # each partition's first global position


def cascade_decide(ddf: Any, proxy: DecideSpec, cascade: Cascade, setup: DaskSetup) -> Any:
    """The lazy cascade frame of `gw_dask.decide(..., cascade=...)`, its threshold set now (module doc)."""
    question = CascadeQuestion.of(proxy.questions, cascade)
    family = recipes.decisions_recipe_for(proxy.questions, proxy.model)
    added = [f"{question.name}{suffix}" for suffix in CASCADE_COLUMNS]
    run, meta = checked_run(ddf, family, setup, added=added)
    job = CascadeJob(proxy, cascade, question)
    score, mine, offsets = _scores(ddf, job, run)
    valid, sampled = sample_positions(score, cascade)
    asked = np.unique(sampled)
    answers, spend = _sample_answers(ddf, job, run, asked, offsets)
    said = dict(zip(asked.tolist(), answers, strict=True))
    threshold, answered = threshold_for(score, mine, (valid, sampled), said, cascade)
    routed = int((~answered & ~np.isin(np.arange(len(score)), asked)).sum())
    job = dataclasses.replace(job, threshold=threshold, said=said, offsets=offsets)
    empty = np.empty(0, dtype=object), np.zeros(0, dtype=bool), np.empty(0, dtype=float)
    lazy = ddf.map_partitions(cascade_partition, job=job, run=run,
                              meta=with_cascade_columns(meta, question, run.config.output.prefix, *empty,
                                                        given=ddf.columns if run.config.output.join else ()))
    counts = CascadeSummary.of(cascade, threshold, len(answered), int(answered.sum()), (len(asked), routed), spend)
    known = dataclasses.replace(counts, oracle_sent=None, oracle_cached=None, oracle_cost=None, all_oracle_cost=None,
                                sample_oracle=spend)  # the routed rows' spend is known after compute()
    return cascade_frame(lazy, known)


def cascade_frame(lazy: Any, summary: CascadeSummary) -> Any:
    """`lazy` as a `CascadeDataFrame`: a dask DataFrame with the cascade's typed summary as ``.cascade``
    (dask's own methods return plain dask frames, which do not carry it)."""
    import dask.dataframe as dd

    class CascadeDataFrame(dd.DataFrame):
        """A lazy cascade frame: dask's DataFrame and the summary known when it was built."""

        def __init__(self, expr: Any, cascade: CascadeSummary) -> None:
            super().__init__(expr)  # type: ignore[no-untyped-call]  # dask's DataFrame.__init__ has no annotations
            self._cascade = cascade

        @property
        def cascade(self) -> CascadeSummary:
            return self._cascade

    return CascadeDataFrame(lazy.expr, summary)


def _proxy(partition: pd.DataFrame, job: CascadeJob, config: RunConfig) -> tuple[BatchFrame, np.ndarray, np.ndarray]:
    """The proxy's run on a partition (from the checkpoint when it ran before), its score and answer."""
    proxy = _client.run_sync(job.asked.run(partition, config), config.gateway)
    columns = proxy_columns(proxy, partition, config)
    return proxy, job.question.score(columns, job.cascade.metric), job.question.answers(columns)


def _scores_partition(partition: pd.DataFrame, *, job: CascadeJob, run: WorkerRun,
                      partition_info: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Eager step: the proxy's score and answer per row, and the partition's number."""
    with run.here() as config:
        _, score, mine = _proxy(partition, job, config)
    number = partition_info["number"] if partition_info else 0
    return pd.DataFrame({"score": score, "mine": mine, "partition": number}, index=partition.index)


def _scores(ddf: Any, job: CascadeJob, run: WorkerRun) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Per row (in the ddf's order): the proxy's score and answer; and each partition's first position."""
    meta = pd.DataFrame({"score": pd.Series(dtype=float), "mine": pd.Series(dtype=object),
                         "partition": pd.Series(dtype="int64")})
    small = ddf.map_partitions(_scores_partition, job=job, run=run, meta=meta).compute()
    counts = np.bincount(small["partition"].to_numpy(dtype=int), minlength=ddf.npartitions)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    mine = np.array([None if pd.isna(v) else v for v in small["mine"]], dtype=object)  # missing: None
    return small["score"].to_numpy(dtype=float), mine, tuple(int(o) for o in offsets)


def _take(partition: pd.DataFrame, *, wanted: Mapping[int, list[int]],
          partition_info: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The rows of this partition at the wanted positions (by partition number)."""
    number = partition_info["number"] if partition_info else 0
    return partition.iloc[wanted.get(number, [])]


def _sample_answers(ddf: Any, job: CascadeJob, run: WorkerRun, asked: np.ndarray,
                    offsets: tuple[int, ...]) -> tuple[np.ndarray, OracleSpend]:
    """The oracle's answers for the sampled positions: the rows fetched, then one task asks them."""
    import dask
    from dask.dataframe.utils import make_meta

    part = np.searchsorted(offsets, asked, side="right") - 1
    wanted = {int(p): (asked[part == p] - offsets[p]).tolist() for p in np.unique(part)}
    rows = ddf.map_partitions(_take, wanted=wanted, meta=make_meta(ddf)).compute()
    answers: tuple[np.ndarray, OracleSpend] = dask.delayed(_ask_sample)(rows, job, run).compute()
    return answers


def _ask_sample(rows: pd.DataFrame, job: CascadeJob, run: WorkerRun) -> tuple[np.ndarray, OracleSpend]:
    """On a worker (the cluster's limit holds there): the same `Oracle` as pandas, for the sampled rows."""
    with run.here() as config:
        oracle = Oracle.of(rows, job.asked, job.question, job.cascade, config)
        answers = _client.run_sync(oracle.answer(np.arange(len(rows))), config.gateway)
    return answers, oracle.spend


def cascade_partition(partition: pd.DataFrame, *, job: CascadeJob, run: WorkerRun,
                      partition_info: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Lazy step: the proxy again (checkpoint hits), its rows by the threshold, the sample's answers,
    and the oracle for the partition's routed rows (through the checkpoint: a recompute pays nothing)."""
    metric = job.cascade.metric
    with run.here() as config:
        proxy, score, mine = _proxy(partition, job, config)
        oracle = Oracle.of(partition, job.asked, job.question, job.cascade, config)
        oracle.spent(proxy.run, counted=False)
        first = job.offsets[partition_info["number"]] if partition_info else 0
        positions = first + np.arange(len(partition))
        asked = np.isin(positions, list(job.said))
        assert job.threshold is not None, "the client sets the threshold before any partition is routed"
        answered = ~np.isnan(score) & proxy_answers(score, job.threshold, metric) & ~asked
        routed = np.flatnonzero(~answered & ~asked)
        said = {p: job.said[int(g)] for p, g in enumerate(positions) if asked[p]}
        said.update(zip(routed.tolist(), _client.run_sync(oracle.answer(routed), config.gateway), strict=True))
    final = final_answers(mine, answered, said, metric)
    return with_cascade_columns(proxy, job.question, run.config.output.prefix, final, answered, score,
                                given=partition.columns if run.config.output.join else ())
