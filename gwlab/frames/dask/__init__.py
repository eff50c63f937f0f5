"""Every `df.gw` family over a dask DataFrame (`from gwlab.frames import dask as gw_dask`), cascades included."""

from gwlab.frames.dask.calls import chat, decide, extract, messages, respond
from gwlab.frames.dask.partitions import (
    DaskOptions,
    GatewaySpec,
    Limits,
    StoreSpec,
    WorkerRun,
    checked_run,
    decide_meta,
    decide_partition,
    meta_of,
    run_partition,
)

__all__ = ["DaskOptions", "GatewaySpec", "Limits", "StoreSpec", "WorkerRun", "chat", "checked_run", "decide",
           "decide_meta", "decide_partition", "extract", "messages", "meta_of", "respond", "run_partition"]
