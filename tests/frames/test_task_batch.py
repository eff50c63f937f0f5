"""df.gw.images / videos / tasks: one task per row, waited for, downloaded, and never paid for twice.

Against the real embedded gateway (the session's `gateway`), plus the third, differently shaped task
API of tests/support/task_app.py reached by its description only. Faults (a lost answer, a failed lookup) are
injected over the real transport.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.run.budget import Budget
from gwlab.wire.models import DEFAULT_MODELS
from tests.support.task_app import FAMILY, KEY, LoseAnswers, Server, serving


@pytest.fixture
def gw(gateway) -> Iterator[Gateway]:
    with Gateway(gateway.base_url, gateway.api_key) as opened:
        yield opened


@pytest.fixture(scope="module")
def app() -> Iterator[Server]:
    with serving() as server:
        yield server


def scenes(tag: str) -> pd.DataFrame:
    """Three rows, two with the same scene (one task each all the same), on a string index."""
    return pd.DataFrame({"scene": [f"a cat {tag}", f"a boat {tag}", f"a cat {tag}"]}, index=["x", "y", "z"])


def gateway_tasks(db: Path, tag: str, kind: str = "image.task") -> list[dict]:
    """The gateway's own task table: the tasks whose prompt carries this test's tag."""
    with sqlite3.connect(db) as conn:
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM tasks WHERE kind = ?", (kind,))]
    return [b for b in bodies if tag in b["prompt"]]


def run_images(frame: pd.DataFrame, gw: Gateway, tmp_path: Path, **options) -> pd.DataFrame:
    options = {"gateway": gw, "folder": tmp_path / "out", "checkpoint": tmp_path / "ck.sqlite", "progress": False,
               "poll_interval": 0.1, "timeout": 120, "size": "256x256", **options}
    return frame.gw.images("{scene}, drawn", **options)


def test_each_row_gets_its_own_completed_task_and_png_aligned_on_the_index(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    out = run_images(scenes(tag), gw, tmp_path)
    assert list(out.index) == ["x", "y", "z"] and list(out["scene"]) == list(scenes(tag)["scene"])
    assert (out["status"] == "completed").all() and out["task_id"].nunique() == 3  # same prompt, two tasks
    for path in out["file"]:
        assert Path(path).read_bytes().startswith(b"\x89PNG") and str(tmp_path / "out") in path
    assert out["thumbnail"].map(lambda p: Path(p).exists()).all()
    assert (out["seconds"] > 0).all() and (out["finished_at"] >= out["submitted_at"]).all()
    assert out.run.submitted == 3 and out.run.completed == 3 and out.run.model == DEFAULT_MODELS["images"]
    assert len(gateway_tasks(gateway.db, tag)) == 3


def test_running_the_cell_again_submits_nothing_and_keeps_the_results(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    first = run_images(scenes(tag), gw, tmp_path)
    again = run_images(scenes(tag), gw, tmp_path)
    assert again.run.submitted == 0 and again.run.resumed == 3 and again.run.completed == 3
    pd.testing.assert_frame_equal(pd.DataFrame(again), pd.DataFrame(first))
    assert len(gateway_tasks(gateway.db, tag)) == 3


def test_a_submission_left_in_doubt_is_looked_up_by_the_next_run_not_resent(gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    frame = scenes(tag).head(1)
    lose = LoseAnswers("/images/tasks", listing_fails=True)  # answer lost, and the lookup fails too
    with Gateway(gateway.base_url, gateway.api_key, http_transport=lose, max_retries=0) as faulty:
        first = run_images(frame, faulty, tmp_path, errors="coerce")
    assert first["status"].tolist() == ["in_doubt"] and first["task_id"].isna().all()
    assert len(gateway_tasks(gateway.db, tag)) == 1  # the gateway did accept it
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        second = run_images(frame, gw, tmp_path)
    assert second.run.found == 1 and second.run.submitted == 0 and second["status"].tolist() == ["completed"]
    assert [t["id"] for t in gateway_tasks(gateway.db, tag)] == second["task_id"].tolist()


def test_a_budget_admits_only_the_tasks_it_covers_before_anything_is_spent(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    out = run_images(scenes(tag), gw, tmp_path, budget=Budget(cost=1.0), prices={"local/*": 0.4})
    assert out.run.submitted == 2 and out.run.not_run_rows == 1 and out.run.stopped == "budget"
    assert out["status"].tolist() == ["completed", "completed", "not_run"] and out.run.cost == pytest.approx(0.8)
    assert len(gateway_tasks(gateway.db, tag)) == 2


def test_a_pilot_runs_the_first_rows_and_estimates_the_rest(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    out = run_images(scenes(tag), gw, tmp_path, pilot=1, prices={"local/image-preview": 0.25})
    assert out.run.submitted == 1 and out.run.stopped == "pilot"
    assert out.run.pilot["tasks"] == 2 and out.run.pilot["cost"] == pytest.approx(0.5) and out.run.pilot["seconds"] > 0
    assert "pilot: the other 2 tasks" in out.run.text()
    rest = run_images(scenes(tag), gw, tmp_path, prices={"local/image-preview": 0.25})  # the full run after it
    assert rest.run.resumed == 1 and rest.run.submitted == 2 and len(gateway_tasks(gateway.db, tag)) == 3


def test_a_bad_setting_is_refused_before_any_row_is_sent(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(InvalidRequest) as refused:
        run_images(scenes(tag), gw, tmp_path, size="1000x1000")
    assert refused.value.field == "size" and gateway_tasks(gateway.db, tag) == []
    with pytest.raises(InvalidRequest) as video:
        scenes(tag).gw.videos("{scene}", seconds=5, gateway=gw, checkpoint=None, progress=False)
    assert video.value.field == "seconds"


def test_an_empty_prompt_is_an_error_row_with_coerce_and_refused_without(gw, tmp_path):
    frame = pd.DataFrame({"scene": ["a hill", ""]})
    with pytest.raises(InvalidRequest) as refused:
        frame.gw.images("{scene}", gateway=gw, checkpoint=None, progress=False, folder=tmp_path)
    assert refused.value.field == "prompt" and "row 1" in str(refused.value)
    out = frame.gw.images("{scene}", gateway=gw, checkpoint=None, progress=False, folder=tmp_path, errors="coerce",
                          poll_interval=0.1)
    assert out["status"].tolist() == ["completed", "error"] and "prompt" in out["error"][1]


def test_videos_batch_downloads_each_clip_and_its_thumbnail(gw, gateway, tmp_path):
    tag = uuid.uuid4().hex[:8]
    out = pd.DataFrame({"scene": [f"waves {tag}"]}).gw.videos(
        "{scene}", seconds=4, size="1280x720", gateway=gw, folder=tmp_path, checkpoint=None, progress=False,
        poll_interval=0.2, timeout=120)
    assert out["status"].tolist() == ["completed"] and out["file"][0].endswith(".mp4")
    assert Path(out["file"][0]).read_bytes()[4:8] == b"ftyp" and out["thumbnail"][0].endswith(".thumbnail.png")
    assert len(gateway_tasks(gateway.db, tag, kind="video")) == 1


def test_the_notebook_repr_draws_a_thumbnail_per_row_and_the_progress_bar_counts_tasks(gw, tmp_path, capsys):
    tag = uuid.uuid4().hex[:8]
    out = run_images(scenes(tag), gw, tmp_path, progress=True)
    assert "submitted=3" in capsys.readouterr().err  # the bar's counts: submitted, running, finished
    page = out._repr_html_()
    assert page.count("<img src='data:image/png;base64,") == 3 and "3 submitted" in page
    assert "3 completed" in repr(out)


def test_a_described_family_runs_as_a_batch_with_failed_rows_kept(app, tmp_path):
    frame = pd.DataFrame({"prompt": ["a heron", "please fail", "an otter"]}, index=pd.Index([10, 20, 30]))
    with Gateway(app.base_url, KEY) as gw:
        out = frame.gw.tasks(FAMILY, "prompt", model="wanx-v1", params={"parameters.n": 1}, gateway=gw,
                             folder=tmp_path, checkpoint=tmp_path / "ck.sqlite", progress=False, poll_interval=0.01)
    assert out["status"].tolist() == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert out.loc[20, "error"] == "the prompt asked to fail" and pd.isna(out.loc[20, "file"])
    assert Path(out.loc[10, "file"]).read_bytes().startswith(b"\x89PNG") and out.loc[10, "file"].endswith(".png")
    assert out.run.completed == 2 and out.run.failed == 1


def test_a_run_that_times_out_reports_open_tasks_and_the_rerun_polls_without_resubmitting(app, tmp_path):
    frame = pd.DataFrame({"prompt": ["a quick sketch", "running forever"]})
    options = {"model": "m", "folder": tmp_path, "checkpoint": tmp_path / "ck.sqlite", "progress": False,
               "poll_interval": 0.01, "timeout": 2}
    with Gateway(app.base_url, KEY) as gw:
        first = frame.gw.tasks(FAMILY, "prompt", gateway=gw, **options)
        before = app.submissions
        again = frame.gw.tasks(FAMILY, "prompt", gateway=gw, **options)
    assert first.run.stopped == "timeout" and first.run.running >= 1 and first["status"][1] == "RUNNING"
    assert "run the same cell again" in first.run.text()
    assert app.submissions == before and again.run.resumed == 2 and again["task_id"].tolist() == \
        first["task_id"].tolist()


def test_a_task_the_gateway_no_longer_has_ends_its_row_as_an_error_not_a_wait(app, tmp_path):
    frame = pd.DataFrame({"prompt": ["a heron", "vanish without trace"]})
    with Gateway(app.base_url, KEY) as gw:
        out = frame.gw.tasks(FAMILY, "prompt", model="m", gateway=gw, folder=tmp_path, checkpoint=None,
                             progress=False, poll_interval=0.01, timeout=300)
    assert out["status"].tolist() == ["SUCCEEDED", "error"] and "NotFound" in out["error"][1]
    assert out.run.stopped is None and out.run.error_rows == 1 and out.run.running == 0


def test_the_async_twin_runs_on_the_caller_s_loop_with_an_async_gateway(app, tmp_path):
    async def main() -> pd.DataFrame:
        async with AsyncGateway(app.base_url, KEY) as agw:
            return await pd.DataFrame({"prompt": ["a wren"]}).gw.atasks(
                FAMILY, "prompt", model="m", gateway=agw, folder=tmp_path, checkpoint=None, progress=False,
                poll_interval=0.01)

    out = asyncio.run(main())
    assert out["status"].tolist() == ["SUCCEEDED"] and Path(out["file"][0]).exists()


def test_the_key_is_in_no_checkpoint_file_result_or_repr(gw, gateway, tmp_path):
    out = run_images(scenes(uuid.uuid4().hex[:8]).head(1), gw, tmp_path)
    key = gateway.api_key.encode()
    for path in [tmp_path / "ck.sqlite", *(tmp_path / "out").iterdir()]:
        assert key not in path.read_bytes(), path
    assert gateway.api_key not in repr(out) + out._repr_html_() + str(out.attrs)


@pytest.mark.parametrize(("option", "value"), [("concurrency", 0), ("poll_interval", -1), ("timeout", True),
                                               ("budget", -2), ("errors", "ignore")])
def test_a_bad_run_option_is_refused_naming_it_before_anything_is_sent(gw, gateway, tmp_path, option, value):
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(InvalidRequest) as refused:
        run_images(scenes(tag), gw, tmp_path, **{option: value})
    assert refused.value.field == option and gateway_tasks(gateway.db, tag) == []
