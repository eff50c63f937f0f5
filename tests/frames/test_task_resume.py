"""Exactly once across kernels: a task batch SIGKILLed mid-way, then re-run, leaves one task per row."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

from gwlab.client.gateway import Gateway
from tests.frames.task_resume_job import held, run
from tests.support.processes import wait_while_running
from tests.support.task_app import KEY, serving

ROWS = 8
JOB = Path(__file__).with_name("task_resume_job.py")


def task_ids_in(checkpoint: Path) -> int:
    """Rows whose task id the checkpoint holds (0 before the file exists)."""
    try:
        with sqlite3.connect(checkpoint, timeout=30) as conn:
            rows = conn.execute("SELECT response FROM answers").fetchall()
    except sqlite3.OperationalError:
        return 0
    return sum(1 for (response,) in rows if json.loads(response).get("task_id"))


def gateway_tasks(db: Path, tag: str) -> list[dict]:
    with sqlite3.connect(db) as conn:
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM tasks WHERE kind = 'image.task'")]
    return [b for b in bodies if f"of run {tag}" in b["prompt"]]



def paced_batch(gateway, checkpoint: Path, folder: Path, tag: str, *, submitted: int) -> subprocess.Popen[str]:
    """An image batch of ROWS rows at 60/min in its own process, returned once `submitted` rows have a task
    id in the checkpoint (bounded: 120 s), so the test can interrupt it mid-way."""
    env = {**os.environ, "GWLAB_BASE_URL": gateway.base_url, "GWLAB_API_KEY": gateway.api_key}
    process = subprocess.Popen([sys.executable, str(JOB), str(checkpoint), str(folder), tag, str(ROWS), "60"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_while_running(process, lambda: task_ids_in(checkpoint) >= submitted, 120, f"{submitted} submitted rows")
    return process

def test_a_batch_killed_mid_way_and_run_again_has_exactly_one_task_per_row(gateway, tmp_path: Path) -> None:
    tag, checkpoint, folder = uuid.uuid4().hex[:8], tmp_path / "tasks.sqlite", tmp_path / "images"
    process = paced_batch(gateway, checkpoint, folder, tag, submitted=3)
    process.kill()  # SIGKILL, mid-batch: no cleanup of any kind
    process.wait()
    created = len(gateway_tasks(gateway.db, tag))
    assert 3 <= created < ROWS  # killed between submissions: some rows have tasks, some not

    with Gateway(gateway.base_url, gateway.api_key) as gw:
        out = run(gw, tag, ROWS, str(checkpoint), str(folder), None)
    tasks = gateway_tasks(gateway.db, tag)
    assert len(tasks) == ROWS  # exactly one task per row in the gateway's own task table
    assert sorted(t["prompt"] for t in tasks) == sorted(out["scene"])
    # every row's task was either resumed from the checkpoint, found by a lookup (a submission in flight at the
    # kill), or submitted now because it had none; a request still being handled at the kill may be counted late
    assert out.run.submitted + out.run.resumed + out.run.found == ROWS and out.run.submitted <= ROWS - created
    assert (out["status"] == "completed").all() and out["task_id"].nunique() == ROWS
    assert set(out["task_id"]) == {t["id"] for t in tasks}


def test_a_batch_killed_while_a_submission_s_answer_is_on_its_way_finds_that_task_instead_of_resending(tmp_path):
    checkpoint, folder = tmp_path / "tasks.sqlite", tmp_path / "results"
    root = str(Path(__file__).resolve().parents[2])  # the checkout, for the job's `tests.support` import
    with serving() as app:
        env = {**os.environ, "GWLAB_BASE_URL": app.base_url, "GWLAB_API_KEY": KEY,
               "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        process = subprocess.Popen([sys.executable, str(JOB), str(checkpoint), str(folder), "held"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # accepted, its answer held back
        wait_while_running(process, lambda: any("hold" in t["prompt"] for t in list(app.tasks.values())), 120,
                           "the held submission's arrival")
        process.kill()  # SIGKILL while the submission's answer is on its way: the row is in doubt
        process.wait()
        app.release.set()
        assert app.submissions == 2 and task_ids_in(checkpoint) == 1

        with Gateway(app.base_url, KEY) as gw:
            out = held(gw, str(checkpoint), str(folder))
    assert out.run.resumed == 1 and out.run.found == 1 and out.run.submitted == 1
    assert app.submissions == 3  # one per row: the in-doubt row's task was found, never resent
    assert out["status"].tolist() == ["SUCCEEDED"] * 3 and out["task_id"].nunique() == 3


def test_ctrl_c_mid_batch_says_how_many_rows_have_a_saved_task_and_that_a_rerun_goes_on(gateway, tmp_path):
    tag, checkpoint, folder = uuid.uuid4().hex[:8], tmp_path / "tasks.sqlite", tmp_path / "images"
    process = paced_batch(gateway, checkpoint, folder, tag, submitted=2)
    process.send_signal(signal.SIGINT)  # Ctrl-C, or a notebook's "interrupt kernel"
    _, stderr = process.communicate(timeout=120)
    last = stderr.strip().splitlines()[-1]  # what a terminal or a notebook shows under the traceback
    kept = task_ids_in(checkpoint)
    assert last.startswith("gwlab.RunInterrupted: interrupted: "), last
    assert f"{kept} of {ROWS} rows have a task, whose ids are saved in the checkpoint {checkpoint}" in last
    assert "run the same cell again to go on" in last and process.returncode != 0
    assert len(gateway_tasks(gateway.db, tag)) == kept  # every submission answered reached the checkpoint
