"""Every `df.gw` family over a dask DataFrame: the accessor's work per partition, one checkpoint and one
limit for all workers.

`decide`, `chat`, `respond` and `messages` (calls.py) are `ddf.map_partitions(run_partition, ..., meta=...)`. The
meta is built here from the family (its tidy columns and the meta columns, with their dtypes), so dask
never calls a partition with fake rows to infer the schema, which would send requests.

What the workers share, and where it lives:
- **the checkpoint**: a partition computed twice (a retried task, a lost worker, a second `compute()`)
  sends only rows no worker has answered. A `postgresql://` URL is a server every host reaches, with
  claims, so a row another live worker is asking is not asked twice (`checkpoint_postgres`). A path is a
  SQLite file: one machine only (SQLite locking over a network file system is not reliable); a worker
  that cannot see the file the client created refuses to run rather than start a private one.
- **the limit** (requests/min, tokens/min, requests in flight, and a 429's pause): on a dask.distributed
  cluster it is held by the scheduler (`cluster_limits`), so it needs no file and survives the loss of
  any worker. Without distributed (dask's threaded scheduler) it is the SQLite file's table
  (`SharedTokenBucket`) or, with a URL checkpoint, one bucket per process.

Workers connect with a picklable `GatewaySpec`; leave its key out and each worker reads `GWLAB_API_KEY`
from its own environment, so the key is in no task graph at all (given, it travels hidden from reprs).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required, TypedDict

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import _client, recipes
from gwlab.frames import columns as tidy
from gwlab.frames.extract import Structured, typed_columns
from gwlab.frames.recipes import META_COLUMNS, RowRecipe
from gwlab.frames.run.config import RunConfig, SendLimits, Spending, Store
from gwlab.frames.run.limiter import DEFAULT_BURST_SECONDS, Limiter, SharedTokenBucket, TokenBucket
from gwlab.frames.specs import DecideSpec, ExtractSpec, TextSpec
from gwlab.frames.store.checkpoint import Checkpoint, is_store_url, mask_url
from gwlab.frames.store.stores import open_checkpoint
from gwlab.wire.schema import Schema

RowSpec = DecideSpec | TextSpec | ExtractSpec  # what a partition runs

__all__ = ["PARTITION_OPTIONS", "DaskExtractOptions", "DaskOptions", "DaskSetup", "GatewaySpec", "Limits", "StoreSpec",
           "WorkerRun", "checked_run", "decide_meta", "decide_partition", "lazy_run", "meta_of", "run_partition"]


@dataclass(frozen=True)
class GatewaySpec:
    """Where workers send: a base URL and a key (None: `GWLAB_API_KEY` on the worker)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, gateway: Any) -> GatewaySpec:
        """The spec of a connected gateway (its base URL and key), to ship to workers."""
        if isinstance(gateway, GatewaySpec):
            return gateway
        from gwlab.client.gateway import Gateway

        transport = (gateway.twin if isinstance(gateway, Gateway) else gateway).transport
        return cls(transport.base_url, transport.api_key_for_workers())


@dataclass(frozen=True)
class StoreSpec:
    """The checkpoint as the task graph carries it: a path or a URL, its password masked in the repr."""

    address: str = field(repr=False)

    def __repr__(self) -> str:
        return f"StoreSpec({mask_url(self.address)!r})"

    @property
    def is_url(self) -> bool:
        return is_store_url(self.address)

    @classmethod
    def of(cls, checkpoint: str | Path | StoreSpec) -> StoreSpec:
        """A URL as given; a path made absolute and created here (schema included), by the client."""
        if isinstance(checkpoint, StoreSpec):
            return checkpoint
        if is_store_url(checkpoint):
            return cls(str(checkpoint))
        path = Path(checkpoint).resolve()
        Checkpoint(path).close()
        return cls(str(path))

    def open(self) -> Any:
        """The store on a worker; a SQLite file the client made but this worker cannot see is refused."""
        if not self.is_url and not Path(self.address).exists():
            raise InvalidRequest("checkpoint", f"{self.address} is not on this worker's disk: a SQLite "
                                               "checkpoint is one machine's. Workers on several hosts need a "
                                               "checkpoint they all reach: pass checkpoint='postgresql://...'")
        return open_checkpoint(self.address)


@dataclass(frozen=True)
class Limits:
    """One limit for the sum of all workers: rates, requests in flight, and the name runs share it by."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_in_flight: int | None = None
    name: str = "default"
    burst: float = DEFAULT_BURST_SECONDS

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise InvalidRequest(name, f"must be a positive number or None; got {value!r}")
        if self.max_in_flight is not None and (not isinstance(self.max_in_flight, int) or self.max_in_flight < 1):
            raise InvalidRequest("max_in_flight", f"must be a positive integer or None; got {self.max_in_flight!r}")
        if not self.burst > 0:
            raise InvalidRequest("burst", f"must be a positive number of seconds; got {self.burst!r}")


_gateways: dict[tuple[str, str], Any] = {}
_buckets: dict[tuple[Any, ...], TokenBucket] = {}
_worker_lock = threading.Lock()


def _worker_gateway(spec: GatewaySpec) -> Any:
    """One sync Gateway per worker process and address, shared by its threads."""
    key = spec.api_key or os.environ.get("GWLAB_API_KEY", "")
    with _worker_lock:
        gateway = _gateways.get((spec.base_url, key))
        if gateway is None:
            from gwlab.client.gateway import Gateway

            gateway = _gateways[(spec.base_url, key)] = Gateway(spec.base_url, key)
        return gateway


def _worker_limiter(limits: Limits, store: StoreSpec) -> Limiter:
    """The scheduler's limit on a distributed worker; else the SQLite file's, else this process's."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        pass
    else:
        from gwlab.frames.run.cluster_limits import ClusterLimiter

        return ClusterLimiter(limits.name, limits.requests_per_minute, limits.tokens_per_minute,
                              burst=limits.burst, max_in_flight=limits.max_in_flight)
    if limits.max_in_flight:
        raise InvalidRequest("max_in_flight", "is held by a dask.distributed scheduler; this partition runs "
                                              "without one (use concurrency= per partition instead)")
    if not store.is_url:
        return SharedTokenBucket(store.address, limits.requests_per_minute, limits.tokens_per_minute,
                                 name=limits.name, burst=limits.burst)
    with _worker_lock:  # the threads of this process run on one gateway loop: one bucket serves them
        config = (limits.name, limits.requests_per_minute, limits.tokens_per_minute, limits.burst)
        return _buckets.setdefault(config, TokenBucket(limits.requests_per_minute, limits.tokens_per_minute,
                                                        burst=limits.burst))


@dataclass(frozen=True)
class WorkerRun:
    """What a worker needs to send: where, the shared checkpoint and limit, and the run's options."""

    gateway: GatewaySpec
    checkpoint: StoreSpec
    limits: Limits
    config: RunConfig

    @contextmanager
    def here(self) -> Iterator[RunConfig]:
        """The row run config of this worker: the Dask run's (concurrency, errors, budget, blank, join,
        prefix), sending through this worker's connection and limit to the store, open while it lasts."""
        store = self.checkpoint.open()  # first: the SQLite limiter would create a missing file
        try:
            limiter = _worker_limiter(self.limits, self.checkpoint)
            connection = _client.connection(_worker_gateway(self.gateway))
            in_flight = getattr(limiter, "in_flight", None)
            if in_flight is not None:
                connection = dataclasses.replace(connection, send=in_flight(connection.send))
            c = self.config
            yield RunConfig(kind="rows", gateway=connection, limits=SendLimits(c.limits.concurrency, limiter=limiter),
                            spending=Spending(budget=c.spending.budget), store=Store(store), failures=c.failures,
                            output=dataclasses.replace(c.output, progress=False))
        finally:
            store.close()


@dataclass(frozen=True)
class DaskSetup:
    """The Dask keywords as the door (`frames/dask/calls.py`) checked them: where workers send and keep
    answers (made worker-ready by `checked_run`), the cluster's one limit, the partitions' run config."""

    gateway: Any
    checkpoint: Any
    limits: Limits
    config: RunConfig


def meta_of(meta: pd.DataFrame, family: RowRecipe, *, join: bool = True, prefix: str = "",
            schema: Schema | None = None) -> pd.DataFrame:
    """The empty frame `run_partition` returns for a partition shaped like `meta`, for `family` (with
    `schema`: extract's typed columns)."""
    dtypes = {**family.columns, **META_COLUMNS}
    answers = pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in dtypes.items()}, index=meta.index[:0])
    if schema is not None:
        answers = typed_columns(answers, schema)
    answers.columns = [f"{prefix}{name}" for name in answers.columns]
    return pd.concat([meta.iloc[:0], answers], axis=1) if join else answers


def decide_meta(meta: pd.DataFrame, questions: Mapping[str, Any], *, model: str | None = None,
                join: bool = True, prefix: str = "") -> pd.DataFrame:
    """The empty frame `decide` returns per partition shaped like `meta`."""
    family = recipes.decisions_recipe_for(questions, model)
    return meta_of(meta, family, join=join, prefix=prefix)


def run_partition(partition: pd.DataFrame, *, spec: RowSpec, gateway: GatewaySpec, checkpoint: StoreSpec,
                  limits: Limits, config: RunConfig | None = None) -> pd.DataFrame:
    """`spec` run over the partition (as its `df.gw` method would) with the shared checkpoint and limit; a
    plain DataFrame. `config` holds the run options a partition applies (concurrency, errors, join,
    prefix, budget), checked once when the lazy frame was built; None: the Dask defaults."""
    run = WorkerRun(gateway, checkpoint, limits, config or RunConfig(kind="dask"))
    with run.here() as here:
        out = _client.run_sync(spec.run(partition, here), here.gateway)
    return pd.DataFrame(out)


def decide_partition(partition: pd.DataFrame, *, state: str | Sequence[str] | Mapping[str, str],
                     questions: Mapping[str, Any], gateway: GatewaySpec, checkpoint: str | StoreSpec,
                     model: str | None = None, limits: Limits | None = None, **options: Any) -> pd.DataFrame:
    """`run_partition` for decisions, to call `map_partitions` yourself (with `meta=decide_meta(...)`);
    `options` are concurrency, errors, join, prefix and budget."""
    return run_partition(partition, spec=DecideSpec(state, questions, model), gateway=gateway,
                         checkpoint=StoreSpec.of(checkpoint), limits=limits or Limits(),
                         config=RunConfig.of("dask", options))


class DaskOptions(TypedDict, total=False):
    """Options every function here takes (documented in `_SHARED_DOC`); gateway and checkpoint are required."""

    gateway: Required[Any]
    checkpoint: Required[str | Path | StoreSpec]
    requests_per_minute: float | None
    tokens_per_minute: float | None
    max_in_flight: int | None
    limiter_name: str
    burst: float
    concurrency: int
    errors: str
    join: bool
    prefix: str
    budget_per_partition: int | None
    blank: str


class DaskExtractOptions(DaskOptions, total=False):
    """`extract`'s options: the shared ones, and how answers are asked for (as in ``df.gw.extract``)."""

    max_reasks: int
    structured: Structured


# the DaskOptions each partition's row run applies (the others configure the cluster's shared parts)
PARTITION_OPTIONS = ("concurrency", "errors", "join", "prefix", "blank")


def lazy_run(ddf: Any, spec: RowSpec, family: RowRecipe, setup: DaskSetup, schema: Schema | None = None) -> Any:
    """The lazy frame: checked and described here, sent by the workers on `compute()`."""
    run, meta = checked_run(ddf, family, setup, schema)
    return ddf.map_partitions(run_partition, spec=spec, gateway=run.gateway, checkpoint=run.checkpoint,
                              limits=run.limits, config=run.config, meta=meta)


def checked_run(ddf: Any, family: RowRecipe, setup: DaskSetup, schema: Schema | None = None,
                added: Sequence[str] = ()) -> tuple[WorkerRun, pd.DataFrame]:
    """A column clash refused (`added` included), the family's meta, and what workers are shipped."""
    from dask.dataframe.utils import make_meta  # dask is needed only here and by the caller's frame

    join, prefix = setup.config.output.join, setup.config.output.prefix
    tidy.refuse_clash(ddf.columns, [*family.columns, *META_COLUMNS, *added], prefix=prefix, join=join)
    meta = meta_of(make_meta(ddf), family, join=join, prefix=prefix, schema=schema)  # dask's public empty frame
    run = WorkerRun(GatewaySpec.of(setup.gateway), StoreSpec.of(setup.checkpoint), setup.limits, setup.config)
    return run, meta
