"""`pilot=` with `batch=`: the first rows go as a batch job, and the rest is estimated from it at the batch
price, split into jobs by the provider's limits, timed by the pilot job's own turnaround beside the window.
On the loopback batch stub, which bills a fixed usage per answer, so the estimate can be checked exactly
against what the rest then bills."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gwlab import BatchOptions
from gwlab.client.gateway import Gateway
from tests.support.batch_stub import USAGE_IN, USAGE_OUT, WINDOW, Script, batch_stub

PRICE = {"stub-model": {"input": 2.0, "output": 8.0}}  # $/M tokens; the batch pays half
FAST = BatchOptions(poll=0.01, max_poll=0.05)


def _frame(n: int) -> pd.DataFrame:  # questions of one length, so the rest's bodies estimate alike
    return pd.DataFrame({"q": [f"question {i}" for i in range(n)]})


def _run(url: str, frame: pd.DataFrame, checkpoint: Path, batch: BatchOptions = FAST, **extra: object) -> pd.DataFrame:
    with Gateway(url, "sk-stub") as gw:
        return frame.gw.chat("{q}", model="stub-model", max_tokens=5, gateway=gw, checkpoint=checkpoint,
                             batch=batch, progress=False, prices=PRICE, **extra)


def test_a_pilot_prices_the_rest_at_the_batch_rate_as_its_jobs_then_bill_it(tmp_path: Path) -> None:
    split = BatchOptions(poll=0.01, max_poll=0.05, max_requests=4)
    with batch_stub(Script()) as (url, state):
        piloted = _run(url, _frame(10), tmp_path / "c.sqlite", split, pilot=4)
        assert len(state.submitted) == 4  # only the pilot's requests were sent
        rest = _run(url, _frame(10), tmp_path / "c.sqlite", split)
    estimate = piloted.run.pilot
    assert piloted.run.stopped == "pilot" and (piloted["__status"].iloc[4:] == "not_run").all()
    assert (estimate["rows"], estimate["requests"], estimate["jobs"], estimate["batch"]) == (6, 6, 2, True)
    assert estimate["input_tokens"] == pytest.approx(6 * USAGE_IN)  # scaled by what the pilot billed
    assert estimate["output_tokens"] == pytest.approx(6 * USAGE_OUT)
    assert rest.run.batch["submitted"] == 6 and max(state.billed.values()) == 1
    assert estimate["cost"] == pytest.approx(rest.run.cost)  # what the rest then billed, at the batch rate
    assert estimate["cost"] == pytest.approx(0.5 * (6 * USAGE_IN * 2.0 + 6 * USAGE_OUT * 8.0) / 1e6)
    assert estimate["window_s"] == WINDOW and estimate["turnaround_s"] is not None
    assert estimate["seconds"] == pytest.approx(estimate["turnaround_s"] / 4 * 6)  # the pilot's pace per request
    assert "at the batch price, in 2 job(s)" in piloted.run.text()


def test_a_pilot_still_running_estimates_the_rest_s_time_as_the_window(tmp_path: Path) -> None:
    with batch_stub(Script(wait_cancel=True)) as (url, _state):
        piloted = _run(url, _frame(6), tmp_path / "c.sqlite", BatchOptions(wait=False), pilot=2)
    estimate = piloted.run.pilot
    assert estimate["turnaround_s"] is None and estimate["seconds"] == estimate["window_s"] == 24 * 3600
    assert estimate["requests"] == 4 and estimate["output_tokens"] == pytest.approx(4 * 5)  # max_tokens: unbilled yet
