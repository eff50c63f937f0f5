"""The local gateway's image tasks (/v1/images/tasks): submit, poll, download PNGs, cancel, delete."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from gwlab.wire.models import DEFAULT_MODELS
from tests.support import wait_until
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

TERMINAL = ("completed", "failed", "cancelled")


def _call(method: str, gateway: RunningGateway, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, f"{gateway.base_url}{path}", headers={"Authorization": f"Bearer {gateway.api_key}"},
                         timeout=30, **kw)


def _create(gateway: RunningGateway, **fields: Any) -> dict[str, Any]:
    r = _call("POST", gateway, "/images/tasks", json={"prompt": "a lighthouse in fog", **fields})
    assert r.status_code == 200, r.text
    return r.json()


def _wait(gateway: RunningGateway, task_id: str) -> list[dict[str, Any]]:
    """Poll until a terminal status; every body seen (bounded: never a hang)."""
    seen: list[dict[str, Any]] = []

    def finished() -> bool:
        r = _call("GET", gateway, f"/images/tasks/{task_id}")
        assert r.status_code == 200, r.text
        seen.append(r.json())
        return seen[-1]["status"] in TERMINAL

    wait_until(finished, timeout=120, interval=0.05, what=f"image task {task_id} finishing")
    return seen


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """A gateway whose renders take 30 s a step: its tasks stay open for as long as a test needs."""
    running = start_gateway(tmp_path_factory.mktemp("slow") / "g.sqlite", "--video-seconds-per-step", "30")
    yield running
    stop_gateway(running)


def test_an_image_task_goes_from_queued_through_progress_to_a_real_png(gateway: RunningGateway) -> None:
    created = _create(gateway, size="256x256")
    assert created["status"] == "queued" and created["id"].startswith("imgtask_")
    assert created["model"] == DEFAULT_MODELS["images"]  # the one catalog's default, not a literal
    seen = _wait(gateway, created["id"])
    assert seen[-1]["status"] == "completed" and seen[-1]["progress"] == 100
    progress = [body["progress"] for body in seen]
    assert progress == sorted(progress)  # never goes back
    r = _call("GET", gateway, f"/images/tasks/{created['id']}/content")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(r.content)).size == (256, 256)
    thumb = _call("GET", gateway, f"/images/tasks/{created['id']}/content", params={"variant": "thumbnail"})
    assert thumb.headers["content-type"] == "image/png" and Image.open(io.BytesIO(thumb.content)).size[0] <= 256


def test_the_default_size_is_512_square(gateway: RunningGateway) -> None:
    created = _create(gateway)
    assert created["size"] == "512x512"


def test_cancelling_an_open_task_makes_it_cancelled_with_no_content(slow: RunningGateway) -> None:
    created = _create(slow)
    r = _call("POST", slow, f"/images/tasks/{created['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and r.json()["cancelled_at"]
    assert _call("GET", slow, f"/images/tasks/{created['id']}").json()["status"] == "cancelled"
    content = _call("GET", slow, f"/images/tasks/{created['id']}/content")
    assert content.status_code == 404 and content.json()["error"]["code"] == "image_task_cancelled"


def test_cancelling_a_finished_task_leaves_it_completed(gateway: RunningGateway) -> None:
    created = _create(gateway, size="256x256")
    _wait(gateway, created["id"])
    r = _call("POST", gateway, f"/images/tasks/{created['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "completed"


def test_content_before_completion_is_404_never_409(slow: RunningGateway) -> None:
    created = _create(slow)
    r = _call("GET", slow, f"/images/tasks/{created['id']}/content")
    assert r.status_code == 404 and r.json()["error"]["code"] == "image_task_not_ready"
    _call("POST", slow, f"/images/tasks/{created['id']}/cancel")


@pytest.mark.parametrize(("fields", "param"), [({"size": "1000x1000"}, "size"), ({"prompt": ""}, "prompt"),
                                               ({"prompt": None}, "prompt"), ({"model": 3}, "model")])
def test_invalid_fields_are_400_naming_the_field(gateway: RunningGateway, fields: dict, param: str) -> None:
    r = _call("POST", gateway, "/images/tasks", json={"prompt": "a fox", **fields})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_a_video_model_is_refused_for_images(gateway: RunningGateway) -> None:
    r = _call("POST", gateway, "/images/tasks", json={"prompt": "a fox", "model": DEFAULT_MODELS["videos"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_supported"


def test_unknown_variant_is_400_and_unknown_id_404(gateway: RunningGateway) -> None:
    created = _create(gateway, size="256x256")
    bad = _call("GET", gateway, f"/images/tasks/{created['id']}/content", params={"variant": "poster"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "variant"
    for method, path in (("GET", ""), ("GET", "/content"), ("POST", "/cancel"), ("DELETE", "")):
        r = _call(method, gateway, f"/images/tasks/imgtask_nope{path}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "image_task_not_found"


def test_deleted_task_is_gone_and_the_listing_is_newest_first(gateway: RunningGateway) -> None:
    first, second = _create(gateway, prompt="first"), _create(gateway, prompt="second")
    listed = _call("GET", gateway, "/images/tasks", params={"limit": 2}).json()
    assert [t["id"] for t in listed["data"]] == [second["id"], first["id"]] and listed["object"] == "list"
    assert _call("DELETE", gateway, f"/images/tasks/{first['id']}").json()["deleted"] is True
    assert _call("GET", gateway, f"/images/tasks/{first['id']}").status_code == 404


def test_tasks_are_persisted_in_the_gateway_sqlite(gateway: RunningGateway) -> None:
    created = _create(gateway, size="256x256")
    _wait(gateway, created["id"])
    with sqlite3.connect(Path(gateway.db)) as conn:
        kind, = conn.execute("SELECT kind FROM tasks WHERE id = ?", (created["id"],)).fetchone()
        variants = {v for (v,) in conn.execute("SELECT variant FROM task_content WHERE task_id = ?",
                                               (created["id"],))}
    assert kind == "image.task" and variants == {"image", "thumbnail"}
