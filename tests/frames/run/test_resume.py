"""Durable resume: a run killed mid-way, then re-run, bills no checkpointed row twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gwlab.client.gateway import Gateway
from tests.frames.run.resume_job import QUESTIONS, frame
from tests.support.gateways import RequestLog
from tests.support.processes import wait_while_running
from tests.support.tickets import DECISIONS

ROWS = 60
JOB = Path(__file__).with_name("resume_job.py")


def start(gateway, checkpoint: Path, rpm: float) -> subprocess.Popen[str]:
    env = {**os.environ, "GWLAB_BASE_URL": gateway.base_url, "GWLAB_API_KEY": gateway.api_key}
    return subprocess.Popen([sys.executable, str(JOB), str(checkpoint), str(ROWS), str(rpm)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answered(checkpoint: Path) -> int:
    try:
        with sqlite3.connect(checkpoint, timeout=30) as conn:
            return conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def wait_for(checkpoint: Path, rows: int, process: subprocess.Popen[str]) -> int:
    return wait_while_running(process, lambda: (n := answered(checkpoint)) >= rows and n, 120,
                              f"{rows} checkpointed rows to kill the run at")


def writes(checkpoint: Path) -> list[int]:
    with sqlite3.connect(checkpoint) as conn:
        return [row[0] for row in conn.execute("SELECT writes FROM answers")]


def rerun(gateway, checkpoint: Path):
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        return frame(ROWS).gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=checkpoint, progress=False)


def test_run_killed_mid_way_resumes_without_resending_a_checkpointed_row(gateway, tmp_path: Path) -> None:
    log, checkpoint = RequestLog(gateway.db), tmp_path / "answers.sqlite"
    mark = log.mark()
    process = start(gateway, checkpoint, rpm=600)  # ~10 requests/s: slow enough to be killed mid-way
    wait_for(checkpoint, 10, process)
    process.kill()  # SIGKILL: no cleanup of any kind
    process.wait()
    kept = answered(checkpoint)
    assert 10 <= kept < ROWS

    resumed_at = time.time()
    out = rerun(gateway, checkpoint)
    # split by when the gateway received each request: one in flight at the kill may be logged late
    first, second = log.split(mark, resumed_at, DECISIONS)
    # requests in flight at the kill were answered by the gateway but never reached the checkpoint
    lost_in_flight = len(first) - kept
    # at most two per worker (docs/pandas.md, Resume): its request in flight, and the answer it got whose
    # commit the writer thread had not finished (on a busy machine the writer may lag its 5 ms linger)
    assert 0 <= lost_in_flight <= 2 * 4
    assert len(second) == ROWS - kept  # only the missing rows were sent: 0 checkpointed rows re-billed
    assert out.run.cached == kept and out.run.sent == ROWS - kept
    assert out.run.input_tokens == sum(row["input_tokens"] for row in second)
    assert out["urgent__noul"].notna().all() and answered(checkpoint) == ROWS
    assert writes(checkpoint) == [1] * ROWS  # every row answered (and stored) exactly once


def test_interrupted_run_finishes_its_requests_in_flight_so_nothing_is_billed_twice(
        gateway, tmp_path: Path) -> None:
    log, checkpoint = RequestLog(gateway.db), tmp_path / "answers.sqlite"
    mark = log.mark()
    process = start(gateway, checkpoint, rpm=600)
    wait_for(checkpoint, 10, process)
    process.send_signal(signal.SIGINT)  # Ctrl-C, or a notebook's "interrupt kernel"
    _, stderr = process.communicate(timeout=60)
    assert "RunInterrupted" in stderr
    kept = answered(checkpoint)
    assert len(log.settled(mark, DECISIONS)) == kept < ROWS  # every answered request reached the checkpoint

    out = rerun(gateway, checkpoint)
    assert len(log.settled(mark, DECISIONS)) == ROWS  # the gateway answered each row exactly once, over both runs
    assert out.run.cached == kept and writes(checkpoint) == [1] * ROWS


def test_interrupt_says_how_many_answers_are_saved_where_and_that_a_rerun_resumes(
        gateway, tmp_path: Path) -> None:
    checkpoint = tmp_path / "answers.sqlite"
    process = start(gateway, checkpoint, rpm=600)
    wait_for(checkpoint, 10, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    kept = answered(checkpoint)
    last = stderr.strip().splitlines()[-1]  # what a terminal or a notebook shows under the traceback
    assert last.startswith("gwlab.RunInterrupted: interrupted: ")  # the name users import (gwlab.__all__)
    assert f"{kept} of {ROWS} answers are saved in the checkpoint {checkpoint} ({kept} received in this run)" in last
    assert f"run the same cell again to resume: saved answers are not sent again, only the {ROWS - kept} " in last
    assert process.returncode != 0  # still an interrupt: the script stopped


def test_interrupt_is_still_a_keyboard_interrupt() -> None:
    from gwlab import RunInterrupted
    from gwlab.frames.run.outcome import RunSummary

    summary = RunSummary(rows=5, requests=5, sent=2, cached=1, checkpoint="/tmp/a.sqlite")
    with pytest.raises(KeyboardInterrupt, match=r"3 of 5 answers are saved in the checkpoint /tmp/a\.sqlite"):
        raise RunInterrupted(summary)
    assert "checkpoint=None kept none" in str(RunInterrupted(RunSummary(requests=5, sent=2)))
