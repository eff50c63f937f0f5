"""Decisions over a dask DataFrame: the accessor's work per partition, one checkpoint and one limit for all.

`decide(ddf, ...)` is `ddf.map_partitions(decide_partition, ..., meta=decide_meta(...))`. The meta is
built here from the questions (their tidy columns and the meta columns, with their dtypes), so dask
never calls a partition with fake rows to infer the schema, which would send requests.

Shared state lives in one SQLite file that every worker opens:
- the checkpoint: a partition computed twice (a retried task, a lost worker, a second `compute()`)
  sends only the rows no worker has answered yet;
- the rate limit: a `SharedTokenBucket` table in the same file, so the sum over all workers holds the
  limit (a limiter per partition would let the sum overrun it, NOTES.md).
One SQLite file means one machine: processes and threads of a `LocalCluster`, not workers on other
hosts (SQLite locking over a network file system is not reliable).

Workers connect with a picklable `GatewaySpec`; the key travels in the task graph, hidden from
its repr, or is read from `GWLAB_API_KEY` on the worker when left out.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gwlab.frames import accessor as _accessor  # importing registers df.gw on the worker too
from gwlab.frames.families import META_COLUMNS, decisions_family
from gwlab.frames.limiter import DEFAULT_BURST_SECONDS, SharedTokenBucket

__all__ = ["GatewaySpec", "decide", "decide_meta", "decide_partition"]


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
        return cls(transport.base_url, transport._key.value)  # the client exposes no public key getter


_gateways: dict[tuple[str, str], Any] = {}
_gateways_lock = threading.Lock()


def _worker_gateway(spec: GatewaySpec) -> Any:
    """One sync Gateway per worker process and address, shared by its threads."""
    key = spec.api_key or os.environ.get("GWLAB_API_KEY", "")
    with _gateways_lock:
        gateway = _gateways.get((spec.base_url, key))
        if gateway is None:
            from gwlab.client.gateway import Gateway

            gateway = _gateways[(spec.base_url, key)] = Gateway(spec.base_url, key)
        return gateway


def decide_meta(meta: pd.DataFrame, questions: Mapping[str, Any], *, model: str | None = None,
                join: bool = True, prefix: str = "") -> pd.DataFrame:
    """The empty frame `decide_partition` returns for a partition shaped like `meta`."""
    family = decisions_family(questions, model or _accessor.DEFAULT_MODELS["decisions"])
    dtypes = {**family.columns, **META_COLUMNS}
    answers = pd.DataFrame({f"{prefix}{name}": pd.Series(dtype=dtype) for name, dtype in dtypes.items()},
                           index=meta.index[:0])
    return pd.concat([meta.iloc[:0], answers], axis=1) if join else answers


def decide_partition(partition: pd.DataFrame, *, state: str | Sequence[str] | Mapping[str, str],
                     questions: Mapping[str, Any], gateway: GatewaySpec, checkpoint: str,
                     model: str | None = None, requests_per_minute: float | None = None,
                     tokens_per_minute: float | None = None, limiter_name: str = "default",
                     burst: float = DEFAULT_BURST_SECONDS, concurrency: int = 8, errors: str = "coerce",
                     join: bool = True, prefix: str = "", budget: int | None = None) -> pd.DataFrame:
    """`partition.gw.decide(...)` with the shared checkpoint and the shared limit; a plain DataFrame."""
    limiter = SharedTokenBucket(checkpoint, requests_per_minute, tokens_per_minute, name=limiter_name,
                                burst=burst)
    out = partition.gw.decide(state, questions, model=model, gateway=_worker_gateway(gateway),
                              checkpoint=checkpoint, limiter=limiter, concurrency=concurrency, errors=errors,
                              join=join, prefix=prefix, budget=budget, progress=False)
    return pd.DataFrame(out)


def decide(ddf: Any, state: str | Sequence[str] | Mapping[str, str], questions: Mapping[str, Any], *,
           gateway: Any, checkpoint: str | Path, model: str | None = None,
           requests_per_minute: float | None = None, tokens_per_minute: float | None = None,
           limiter_name: str = "default", burst: float = DEFAULT_BURST_SECONDS, concurrency: int = 8,
           errors: str = "coerce", join: bool = True, prefix: str = "",
           budget_per_partition: int | None = None) -> Any:
    """Decisions for every row of a dask DataFrame, lazily; see the module docstring for the sharing.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    state, questions, model, errors, join, prefix
        As in ``df.gw.decide``; ``errors`` defaults to "coerce" because one raising partition would
        fail the whole computation.
    gateway : Gateway, AsyncGateway or GatewaySpec
        Where workers send (only its address and key travel to them).
    checkpoint : path
        The SQLite file shared by every worker (answers and the rate limit). Required: without it a
        retried task would pay twice.
    requests_per_minute, tokens_per_minute : float, optional
        One limit for the sum of all workers.
    limiter_name : str
        Runs sharing a name share a limit.
    burst : float
        Seconds of quota the shared bucket may hold (10 by default).
    concurrency : int
        Requests in flight per partition being computed.
    budget_per_partition : int, optional
        A token budget per partition (a global budget across workers is not offered).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy; its meta is built from the questions, so nothing is sent until ``compute()``.
    """
    checkpoint = str(Path(checkpoint).resolve())
    SharedTokenBucket(checkpoint, requests_per_minute, tokens_per_minute, name=limiter_name, burst=burst)
    meta = decide_meta(ddf._meta, questions, model=model, join=join, prefix=prefix)
    spec = GatewaySpec.of(gateway)
    return ddf.map_partitions(decide_partition, state=state, questions=questions, gateway=spec,
                              checkpoint=checkpoint, model=model, requests_per_minute=requests_per_minute,
                              tokens_per_minute=tokens_per_minute, limiter_name=limiter_name, burst=burst,
                              concurrency=concurrency, errors=errors, join=join, prefix=prefix,
                              budget=budget_per_partition, meta=meta)
