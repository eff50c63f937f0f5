"""UsageDashboard: the ledger as rows, summary and plots, refreshed by a task and on demand."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

from gwlab import Gateway
from gwlab.widgets import UsageDashboard
from tests.support import wait_until
from tests.support.models import PROMPT, TEXT_MODEL

PNG = b"\x89PNG\r\n\x1a\n"


def test_refresh_shows_every_call_newest_first_with_plots(gw: Gateway) -> None:
    gw.chat(PROMPT, model=TEXT_MODEL, max_completion_tokens=2)
    gw.models()
    dashboard = UsageDashboard(gw, start=False)
    dashboard._handle_custom_msg({"type": "refresh"}, [])
    calls = len(gw.ledger.entries())
    assert dashboard.summary["calls"] == calls and len(dashboard.rows) == min(calls, 50)
    newest = dashboard.rows[0]
    assert newest["path"] == "/models" and newest["status"] == 200 and newest["latency_ms"] > 0
    assert dashboard.rows[1]["path"] == "/chat/completions" and dashboard.rows[1]["input_tokens"] > 0
    assert dashboard.summary["input_tokens"] >= dashboard.rows[1]["input_tokens"]
    assert dashboard.plot.startswith(PNG)


def test_the_refresh_task_picks_up_new_calls_until_paused(gw: Gateway) -> None:
    dashboard = UsageDashboard(gw, interval=0.2, plots=False)
    try:
        wait_until(lambda: dashboard.summary.get("calls") == len(gw.ledger.entries()), timeout=10)
        gw.models()
        wait_until(lambda: dashboard.summary.get("calls") == len(gw.ledger.entries()), timeout=10)
        dashboard._handle_custom_msg({"type": "pause"}, [])
        assert dashboard.paused
        wait_until(lambda: dashboard._task is not None and dashboard._task.done(), timeout=10)
        gw.models()
        dashboard._handle_custom_msg({"type": "resume"}, [])
        wait_until(lambda: dashboard.summary.get("calls") == len(gw.ledger.entries()), timeout=10)
        assert not dashboard.paused
    finally:
        dashboard.close()
