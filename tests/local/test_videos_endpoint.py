"""The videos task API against the real gateway: raw HTTP, the openai SDK, and a gateway restart."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from PIL import Image

from tests.support import wait_until
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

VIDEO_KEYS = {"id", "object", "model", "status", "progress", "created_at", "completed_at", "expires_at",
              "prompt", "size", "seconds", "remixed_from_video_id", "error"}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK marks Sora as retiring


def _auth(gateway: RunningGateway, key: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key or gateway.api_key}"}


def _call(method: str, gateway: RunningGateway, path: str, key: str | None = None,
          **kw: Any) -> httpx.Response:
    url = f"{gateway.base_url}{path}"
    return httpx.request(method, url, headers=_auth(gateway, key), timeout=30, **kw)


def _wait(gateway: RunningGateway, video_id: str, key: str | None = None) -> list[dict]:
    """Poll until a terminal status; return every body seen (bounded: never a hang)."""
    seen: list[dict] = []

    def finished() -> bool:
        r = _call("GET", gateway, f"/videos/{video_id}", key)
        assert r.status_code == 200, r.text
        seen.append(r.json())
        return seen[-1]["status"] in ("completed", "failed")

    wait_until(finished, timeout=180, interval=0.1, what=f"video {video_id} finishing")
    return seen


def _create(gateway: RunningGateway, key: str | None = None, **fields: Any) -> dict[str, Any]:
    body = {"prompt": "a lighthouse in fog", "seconds": "4", "size": "1280x720", **fields}
    r = _call("POST", gateway, "/videos", key, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_video_goes_from_queued_through_progress_to_a_real_mp4(gateway: RunningGateway) -> None:
    created = _create(gateway)
    assert set(created) == VIDEO_KEYS
    assert created["object"] == "video" and created["status"] == "queued" and created["progress"] == 0
    assert created["model"] == "local/video-preview" and created["id"].startswith("video_")
    seen = _wait(gateway, created["id"])
    statuses = [v["status"] for v in seen]
    assert set(statuses) <= {"queued", "in_progress", "completed"}
    progress = [v["progress"] for v in seen]
    assert progress == sorted(progress) and all(0 <= p <= 100 for p in progress)
    done = seen[-1]
    assert set(done) == VIDEO_KEYS and done["status"] == "completed" and done["progress"] == 100
    assert done["completed_at"] >= done["created_at"] and done["error"] is None

    video = _call("GET", gateway, f"/videos/{created['id']}/content")
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4"
    assert video.content[4:8] == b"ftyp"
    for variant in ("thumbnail", "spritesheet"):
        r = _call("GET", gateway, f"/videos/{created['id']}/content", params={"variant": variant})
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        assert r.content.startswith(b"\x89PNG\r\n\x1a\n")
    thumb = _call("GET", gateway, f"/videos/{created['id']}/content", params={"variant": "thumbnail"})
    assert Image.open(io.BytesIO(thumb.content)).size == (1280, 720)


def test_mp4_decodes_to_the_requested_size_and_duration(gateway: RunningGateway) -> None:
    av = pytest.importorskip("av")
    created = _create(gateway, size="720x1280", seconds="4")
    _wait(gateway, created["id"])
    data = _call("GET", gateway, f"/videos/{created['id']}/content")
    with av.open(io.BytesIO(data.content)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert (stream.codec_context.width, stream.codec_context.height) == (720, 1280)
        frames = sum(1 for _ in container.decode(stream))
        seconds = container.duration / 1e6
    assert frames > 0 and abs(seconds - 4) < 0.5


def test_content_before_completion_is_404_with_an_openai_error_body_never_409(tmp_path: Path) -> None:
    slow = start_gateway(tmp_path / "g.sqlite", "--video-seconds-per-step", "30")
    try:
        created = _create(slow)
        r = _call("GET", slow, f"/videos/{created['id']}/content")
        assert r.status_code == 404
        error = r.json()["error"]
        assert error["code"] == "video_not_ready" and error["param"] == "video_id"
        assert "completed" in error["message"] and r.headers["x-request-id"].startswith("req_")
    finally:
        stop_gateway(slow)


def test_deleted_video_is_gone_with_its_content(gateway: RunningGateway) -> None:
    created = _create(gateway)
    _wait(gateway, created["id"])
    r = _call("DELETE", gateway, f"/videos/{created['id']}")
    assert r.status_code == 200
    assert r.json() == {"id": created["id"], "object": "video.deleted", "deleted": True}
    for path in ("", "/content", "/content?variant=thumbnail"):
        gone = _call("GET", gateway, f"/videos/{created['id']}{path}")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "video_not_found"
    again = _call("DELETE", gateway, f"/videos/{created['id']}")
    assert again.status_code == 404


def test_video_deleted_while_rendering_never_comes_back(gateway: RunningGateway) -> None:
    created = _create(gateway, seconds="12")
    r = _call("DELETE", gateway, f"/videos/{created['id']}")
    assert r.status_code == 200
    later = _create(gateway)  # rendered after the deleted one by the same worker
    _wait(gateway, later["id"])
    gone = _call("GET", gateway, f"/videos/{created['id']}")
    assert gone.status_code == 404


@pytest.mark.parametrize("path", ["/videos/video_nope", "/videos/video_nope/content"])
def test_unknown_video_id_is_404(gateway: RunningGateway, path: str) -> None:
    r = _call("GET", gateway, path)
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_another_keys_video_is_404(gateway: RunningGateway) -> None:
    created = _create(gateway)
    other = gateway.create_key("videos-other-key")
    r = _call("GET", gateway, f"/videos/{created['id']}", other)
    assert r.status_code == 404


def test_list_is_paginated_newest_first_by_default(gateway: RunningGateway) -> None:
    key = gateway.create_key("videos-list")
    ids = [_create(gateway, key, prompt=f"clip {n}")["id"] for n in range(3)]
    listed = _call("GET", gateway, "/videos", key, params={"limit": 2})
    body = listed.json()
    assert body["object"] == "list" and [v["id"] for v in body["data"]] == ids[::-1][:2]
    assert body["has_more"] is True and body["first_id"] == ids[2] and body["last_id"] == ids[1]
    rest = _call("GET", gateway, "/videos", key, params={"limit": 2, "after": body["last_id"]}).json()
    assert [v["id"] for v in rest["data"]] == [ids[0]] and rest["has_more"] is False
    asc = _call("GET", gateway, "/videos", key, params={"order": "asc"})
    assert [v["id"] for v in asc.json()["data"]] == ids


@pytest.mark.parametrize(("fields", "param"), [
    ({"seconds": "5"}, "seconds"),
    ({"size": "100x100"}, "size"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": 3}, "prompt"),
    ({"input_reference": {"image_url": "https://example.com/a.png"}}, "input_reference"),
])
def test_invalid_video_fields_are_400_naming_the_field(gateway: RunningGateway, fields: dict,
                                                       param: str) -> None:
    r = _call("POST", gateway, "/videos", json={"prompt": "x", **fields})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_sora_model_id_is_404_model_not_found_pointing_at_the_local_model(gateway: RunningGateway) -> None:
    r = _call("POST", gateway, "/videos", json={"prompt": "x", "model": "sora-2"})
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == "model_not_found" and "local/video-preview" in error["message"]


def test_a_model_of_another_family_is_400(gateway: RunningGateway) -> None:
    r = _call("POST", gateway, "/videos", json={"prompt": "x", "model": "local/decide-e5-small"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_unknown_variant_is_400(gateway: RunningGateway) -> None:
    r = _call("GET", gateway, "/videos/video_x/content", params={"variant": "gif"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "variant"


def test_remix_renders_a_new_video_pointing_at_its_source(gateway: RunningGateway) -> None:
    source = _create(gateway)
    r = _call("POST", gateway, f"/videos/{source['id']}/remix", json={"prompt": "the lighthouse at noon"})
    assert r.status_code == 200
    remix = r.json()
    assert remix["remixed_from_video_id"] == source["id"] and remix["size"] == source["size"]
    assert _wait(gateway, remix["id"])[-1]["status"] == "completed"


# --- the official client ------------------------------------------------------------------------------


@pytest.fixture
def client(gateway: RunningGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0)


def test_openai_sdk_creates_polls_and_downloads(client: openai.OpenAI) -> None:
    video = client.videos.create(prompt="a paper boat on a pond", seconds="4", size="720x1280")
    assert video.status == "queued" and video.model == "local/video-preview"
    done = client.videos.poll(video.id)  # multipart create, then the SDK's own poll helper
    assert done.status == "completed" and done.progress == 100
    assert client.videos.retrieve(video.id).status == "completed"
    content = client.videos.download_content(video.id)
    assert content.content[4:8] == b"ftyp"
    thumb = client.videos.download_content(video.id, variant="thumbnail")
    assert thumb.content.startswith(b"\x89PNG")
    assert video.id in [v.id for v in client.videos.list(limit=100)]
    assert client.videos.delete(video.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        client.videos.retrieve(video.id)


def test_openai_sdk_uploads_an_input_reference_image(client: openai.OpenAI) -> None:
    image = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image, format="PNG")
    video = client.videos.create_and_poll(prompt="red", input_reference=("ref.png", image.getvalue(),
                                                                        "image/png"))
    assert video.status == "completed"
    thumb = Image.open(io.BytesIO(client.videos.download_content(video.id, variant="thumbnail").content))
    assert thumb.convert("RGB").getpixel((5, 640)) == pytest.approx((200, 30, 30), abs=40)


def test_openai_sdk_gets_not_found_for_sora_2(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.videos.create(prompt="x", model="sora-2")
    assert caught.value.code == "model_not_found"


def test_a_non_image_input_reference_is_400(gateway: RunningGateway) -> None:
    r = _call("POST", gateway, "/videos", data={"prompt": "x"},
                   files={"input_reference": ("a.png", b"not an image", "image/png")})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input_reference"


# --- persistence ------------------------------------------------------------------------------------


def _serve_again(first: RunningGateway, *extra: str) -> RunningGateway:
    """`gwlab serve` on the same database, keeping the first gateway's key (tasks belong to a key)."""
    process = subprocess.Popen([sys.executable, "-m", "gwlab.cli", "serve", "--db", str(first.db), *extra],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return RunningGateway(process.stdout.readline().strip(), first.api_key, first.db, process)


def _status_in_db(db: Path, video_id: str) -> str:
    import json

    with sqlite3.connect(db) as conn:
        (body,) = conn.execute("SELECT body FROM tasks WHERE id = ?", (video_id,)).fetchone()
    return json.loads(body)["status"]


def test_unfinished_video_survives_a_gateway_restart_and_completes(tmp_path: Path) -> None:
    # 30 s per step: the first gateway cannot finish before it is stopped
    first = start_gateway(tmp_path / "g.sqlite", "--video-seconds-per-step", "30")
    try:
        video = _create(first)
        done_before = _create(first, prompt="listed, never rendered")
    finally:
        stop_gateway(first)
    assert first.process.returncode == 0
    assert _status_in_db(first.db, video["id"]) in ("queued", "in_progress")

    second = _serve_again(first, "--video-seconds-per-step", "0.01")
    try:
        for v in (video, done_before):
            finished = _wait(second, v["id"])[-1]
            assert finished["status"] == "completed" and finished["created_at"] == v["created_at"]
        r = _call("GET", second, f"/videos/{video['id']}/content")
        assert r.status_code == 200 and r.content[4:8] == b"ftyp"
    finally:
        stop_gateway(second)
    assert _status_in_db(first.db, video["id"]) == "completed"
