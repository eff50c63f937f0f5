"""The batch fault suite: every way a provider batch job can end badly, on loopback stubs of both APIs.

Each case checks the issue's four claims: 0 rows lost (every row answered with its own answer, or
failed naming why), 0 rows billed twice (the stub's per-id billing), only unfinished rows resubmitted,
and the run's cost equal to the stub's billed usage at the batch price."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gwlab
from gwlab import BatchOptions
from gwlab.client.gateway import Gateway
from tests.support import wait_until
from tests.support.batch_stub import USAGE_IN, USAGE_OUT, Script, StubState, batch_stub

PRICE = {"stub-model": {"input": 2.0, "output": 8.0}}  # $/M tokens; the batch pays half
FAST = BatchOptions(poll=0.01, max_poll=0.05)


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"q": [f"question {i}" for i in range(n)]}, index=[f"row{i}" for i in range(n)])


def _run(url: str, frame: pd.DataFrame, checkpoint: Path, *, messages: bool = False,
         batch: Any = FAST, **extra: Any) -> pd.DataFrame:
    with Gateway(url, "sk-stub") as gw:
        if messages:
            return frame.gw.messages("{q}", model="stub-model", max_tokens=5, gateway=gw, checkpoint=checkpoint,
                                     batch=batch, progress=False, prices=PRICE, **extra)
        return frame.gw.chat("{q}", model="stub-model", max_tokens=5, gateway=gw, checkpoint=checkpoint,
                             batch=batch, progress=False, prices=PRICE, **extra)


def _cost(billed: tuple[int, int]) -> float:
    return 0.5 * (billed[0] * 2.0 + billed[1] * 8.0) / 1e6


def _assert_exact(out: pd.DataFrame, state: StubState) -> None:
    """Answered rows carry their own echo; nothing billed twice; the run's cost is what the stub billed."""
    answered = out[out["__status"] != "error"]
    assert (answered["text"] == "echo:" + answered["q"]).all()  # never mis-assigned
    assert max(state.billed.values(), default=0) == 1
    assert all(n >= 1 for n in state.billed.values())


def test_a_clean_job_answers_every_row_out_of_order(tmp_path: Path) -> None:
    with batch_stub(Script(duplicate=0)) as (url, state):
        out = _run(url, _frame(30), tmp_path / "c.sqlite")
    assert (out["__status"] != "error").all() and len(out) == 30
    _assert_exact(out, state)
    assert out.run.batch["cost"] == pytest.approx(_cost(state.billed_usage()))
    assert out.run.cost == pytest.approx(_cost(state.billed_usage()))
    assert out.run.input_tokens == 30 * USAGE_IN and out.run.output_tokens == 30 * USAGE_OUT


@pytest.mark.parametrize("messages", [False, True], ids=["openai", "anthropic"])
def test_expiry_with_a_third_done_keeps_them_and_resubmits_only_the_rest(tmp_path: Path, messages: bool) -> None:
    frame, checkpoint = _frame(30), tmp_path / "c.sqlite"
    with batch_stub(Script(end="expired", finished_share=1 / 3)) as (url, state):
        first = _run(url, frame, checkpoint, messages=messages)
        done = first["__status"] != "error"
        assert done.sum() == 10
        assert first.loc[~done, "__error"].str.contains("not answered by its batch job").all()
        state.script = Script()
        second = _run(url, frame, checkpoint, messages=messages)
        assert (second["__status"] != "error").all()
        assert sorted(state.submitted.values()) == [1] * 10 + [2] * 20  # only the unfinished went again
        _assert_exact(second if not messages else second.rename(columns={}), state)
        total = first.run.cost + second.run.cost
        assert total == pytest.approx(_cost(state.billed_usage()))


def test_out_of_order_duplicate_unknown_and_missing_lines_are_counted_never_misassigned(tmp_path: Path) -> None:
    with batch_stub(Script(duplicate=4, unknown=2, missing=1)) as (url, state):
        out = _run(url, _frame(20), tmp_path / "c.sqlite")
    counts = out.run.batch["counts"]
    assert counts["duplicates"] == 4 and counts["unknown"] == 2 and counts["missing"] == 1
    assert (out["__status"] == "error").sum() == 1  # the missing line's row, eligible again
    _assert_exact(out, state)
    assert out.run.batch["cost"] <= _cost(state.billed_usage())  # the missing line was billed, never delivered


def test_an_error_file_puts_per_row_errors_in_error_and_does_not_fail_the_run(tmp_path: Path) -> None:
    with batch_stub(Script(errored=3)) as (url, state):
        out = _run(url, _frame(12), tmp_path / "c.sqlite")
    errors = out[out["__status"] == "error"]
    assert len(errors) == 3 and errors["__error"].str.contains("answered with an error: bad request").all()
    _assert_exact(out, state)


def test_cancel_mid_run_keeps_what_finished(tmp_path: Path) -> None:
    with batch_stub(Script(end="cancelled", finished_share=0.5, wait_cancel=True)) as (url, state):
        with Gateway(url, "sk-stub") as gw:
            handle = _frame(10).gw.chat("{q}", model="stub-model", max_tokens=5, gateway=gw, progress=False,
                                        checkpoint=tmp_path / "c.sqlite", batch=BatchOptions(wait=False))
            assert handle.run.batch["pending"] == 10 and (handle["__status"] == "error").all()
            job_id = handle.run.batch["jobs"][0]
            gw.batches.cancel(job_id)
        out = _run(url, _frame(10), tmp_path / "c.sqlite")
    assert (out["__status"] != "error").sum() == 5
    assert state.creates == 1  # collecting sent nothing new
    _assert_exact(out, state)


def test_a_submit_whose_answer_was_lost_is_found_not_paid_twice(tmp_path: Path) -> None:
    with batch_stub(Script(lose_create=1)) as (url, state):
        out = _run(url, _frame(8), tmp_path / "c.sqlite")
    assert state.creates == 1 and (out["__status"] != "error").all()
    _assert_exact(out, state)


def test_a_lost_message_batch_submit_is_found_by_size_and_time(tmp_path: Path) -> None:
    with batch_stub(Script(lose_create=1)) as (url, state):
        out = _run(url, _frame(8), tmp_path / "c.sqlite", messages=True)
    assert state.creates == 1 and (out["__status"] != "error").all()


def test_a_job_stuck_validating_past_its_window_expires_and_its_rows_go_again(tmp_path: Path) -> None:
    checkpoint = tmp_path / "c.sqlite"
    with batch_stub(Script(end="expired", finished_share=0.0, validating_polls=3)) as (url, state):
        first = _run(url, _frame(6), checkpoint)
        assert (first["__status"] == "error").all() and not state.billed
        state.script = Script()
        second = _run(url, _frame(6), checkpoint)
    assert (second["__status"] != "error").all() and state.creates == 2
    _assert_exact(second, state)
    assert first.run.cost == 0 and second.run.cost == pytest.approx(_cost(state.billed_usage()))


def test_collecting_twice_sends_nothing(tmp_path: Path) -> None:
    with batch_stub() as (url, state):
        first = _run(url, _frame(5), tmp_path / "c.sqlite")
        again = _run(url, _frame(5), tmp_path / "c.sqlite")
    assert state.creates == 1 and again.run.batch["submitted"] == 0
    assert (again["text"] == first["text"]).all()
    listing = gwlab.batches(tmp_path / "c.sqlite")
    assert list(listing["status"]) == ["completed"] and listing["collected"].all()
    assert listing["cost"].iloc[0] == pytest.approx(_cost(state.billed_usage()))


def test_a_budget_submits_only_what_fits(tmp_path: Path) -> None:
    budget = gwlab.Budget(cost=0.00015, prices=PRICE)
    with batch_stub() as (url, state):
        out = _run(url, _frame(40), tmp_path / "c.sqlite", budget=budget)
    sent = sum(state.submitted.values())
    assert 0 < sent < 40 and out.run.stopped == "budget"
    assert out.run.cost <= 0.00015
    _assert_exact(out, state)


def test_duplicate_rows_share_one_request(tmp_path: Path) -> None:
    frame = pd.DataFrame({"q": ["same", "same", "other"]})
    with batch_stub() as (url, state):
        out = _run(url, frame, tmp_path / "c.sqlite")
    assert sum(state.submitted.values()) == 2 and list(out["text"]) == ["echo:same", "echo:same", "echo:other"]


_KILLED = """
import sys, pandas as pd
from gwlab.client.gateway import Gateway
from gwlab import BatchOptions
url, ckpt = sys.argv[1], sys.argv[2]
frame = pd.DataFrame({"q": [f"question {i}" for i in range(12)]})
with Gateway(url, "sk-stub") as gw:
    frame.gw.chat("{q}", model="stub-model", max_tokens=5, gateway=gw, checkpoint=ckpt, progress=False,
                  batch=BatchOptions(poll=0.05, max_poll=0.05))
"""


def test_sigkill_while_polling_resumes_by_polling_the_same_job(tmp_path: Path) -> None:
    checkpoint = tmp_path / "c.sqlite"
    with batch_stub(Script(wait_cancel=True)) as (url, state):  # never ends while the first process polls
        child = subprocess.Popen([sys.executable, "-c", _KILLED, url, str(checkpoint)],
                                 env={**os.environ, "PYTHONPATH": os.getcwd()})
        try:
            wait_until(lambda: any(j.polls >= 2 for j in state.jobs.values()), timeout=120, interval=0.05,
                       what="the child polling its job")
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        state.script.wait_cancel = False
        out = _run(url, _frame(12).reset_index(drop=True), checkpoint)
    assert state.creates == 1 and (out["__status"] != "error").all()
    _assert_exact(out, state)
    assert json.loads(json.dumps(out.attrs["gwlab_run"]["batch"]))["submitted"] == 0  # plain data in .attrs
