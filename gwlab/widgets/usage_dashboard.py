"""UsageDashboard: the request ledger as a live table, with tokens-over-time and latency plots."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.widgets._bridge import Bridge
from gwlab.widgets._esm import esm_of

__all__ = ["UsageDashboard"]

_SHOWN = ("time", "family", "method", "path", "model", "status", "latency_ms", "input_tokens", "output_tokens",
          "ending", "error", "run")


class UsageDashboard(anywidget.AnyWidget):
    """The gateway's ledger (one row per call, never a key or an input), refreshed every `interval` s.

    Parameters
    ----------
    gw : Gateway, optional
        Whose ledger to show (default: the gateway `gwlab.connect()` returned last).
    interval : float
        Seconds between refreshes (the task runs on the gateway's loop; Pause stops it).
    limit : int
        How many of the newest rows the table shows (the summary counts them all).
    plots : bool
        Draw `gwlab.plots.usage_over_time` and `latency` (redrawn only when rows were added).
    """

    _esm = esm_of(__file__)

    rows = traitlets.List(traitlets.Dict()).tag(sync=True)  # newest first
    summary = traitlets.Dict().tag(sync=True)
    plot = traitlets.Bytes(b"").tag(sync=True)  # PNG: bytes reach the browser as a DataView, no base64
    interval = traitlets.Float(2.0, min=0.2).tag(sync=True)
    paused = traitlets.Bool(False).tag(sync=True)
    updated = traitlets.Unicode("").tag(sync=True)

    def __init__(self, gw: Gateway | AsyncGateway | None = None, *, interval: float = 2.0, limit: int = 50,
                 plots: bool = True, start: bool = True) -> None:
        super().__init__(interval=interval)
        self._bridge = Bridge(gw)
        self._limit, self._plots = limit, plots
        self._drawn_rows = -1
        self._task: concurrent.futures.Future[None] | None = None
        self.on_msg(self._on_front_end)
        if start:
            self.start()

    # -- notebook API -----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the ledger now and update the table (and the plots when rows were added)."""
        self._apply(self._snapshot(draw=self._plots))

    def start(self) -> None:
        """Start the periodic refresh task (on the gateway's loop), if it is not running."""
        if self._task is None or self._task.done():
            self.paused = False
            self._task = self._bridge.submit(self._refresh_forever())

    def stop(self) -> None:
        """Stop refreshing (the table keeps its last state)."""
        self.paused = True
        if self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        self.stop()
        super().close()

    def _on_front_end(self, _widget: Any, content: Mapping[str, Any], _buffers: Sequence[bytes]) -> None:
        kind = content.get("type")
        if kind == "refresh":
            self.refresh()
        elif kind == "pause":
            self.stop()
        elif kind == "resume":
            self.start()

    # -- the refresh task (gateway loop; drawing in a worker thread) ------------------------------
    async def _refresh_forever(self) -> None:
        while True:
            snapshot = await asyncio.to_thread(self._snapshot, draw=self._plots)
            self._bridge.post(self._apply, snapshot)
            await asyncio.sleep(self.interval)

    def _snapshot(self, *, draw: bool) -> dict[str, Any]:
        frame = self._bridge.gateway.usage
        newest = frame.iloc[::-1].head(self._limit)
        rows = [{name: _cell(record.get(name)) for name in _SHOWN} for record in _records(newest)]
        tokens = {name: int(frame[name].fillna(0).sum()) for name in ("input_tokens", "output_tokens")}
        errors = int(frame["error"].notna().sum()) if len(frame) else 0
        # answers that did not end complete (capped, cut, stopped: gwlab/wire/endings.py); a call that failed
        # with no answer is an error only
        cut = (frame["complete"] == False) & (frame["ending"] != "failed")  # noqa: E712 (a boolean column)
        incomplete = int(cut.sum()) if len(frame) else 0
        snapshot: dict[str, Any] = {
            "rows": rows, "summary": {"calls": len(frame), "errors": errors, "incomplete": incomplete, **tokens},
            "updated": _now()}
        if draw and len(frame) != self._drawn_rows and len(frame):
            snapshot["plot"] = _draw(frame)
            self._drawn_rows = len(frame)
        return snapshot

    def _apply(self, snapshot: Mapping[str, Any]) -> None:
        with self.hold_sync():
            for name, value in snapshot.items():
                setattr(self, name, value)


def _records(frame: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = frame.to_dict("records")
    for record in records:
        record["latency_ms"] = round(record["latency_s"] * 1000, 1) if record.get("latency_s") is not None else None
        time: Any = record.get("time")  # a Timestamp, or whatever the ledger held
        record["time"] = time.strftime("%H:%M:%S") if hasattr(time, "strftime") else time
    return records


def _cell(value: Any) -> Any:
    """A JSON-safe table cell (pandas NA and NaN become None)."""
    if value is None:
        return None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def _now() -> str:
    import datetime

    return datetime.datetime.now().strftime("%H:%M:%S")


def _draw(frame: Any) -> bytes:
    """Both plots as one PNG, drawn on a Figure (no pyplot: no global state, safe off the main thread)."""
    from matplotlib.figure import Figure

    from gwlab import plots

    figure = Figure(figsize=(10, 3.2), dpi=90, layout="constrained")
    over_time, latency = figure.subplots(1, 2)
    plots.usage_over_time(frame, ax=over_time)
    plots.latency(frame, ax=latency)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
