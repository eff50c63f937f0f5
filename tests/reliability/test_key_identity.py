"""Issue 30, finding 1: a deleted key's identity is never handed out again, and its data goes with it.

The probe's reproduction, through the `gwlab keys` CLI and the HTTP API of a real `gwlab serve`: dave (the
newest key) stores a response, submits a video and mints a realtime token; `gwlab keys delete dave`;
`gwlab keys create --name eve`. Before the fix eve got dave's integer id, read his stored response (200),
listed and downloaded his video, dave's token opened a realtime session as eve, and the request log merged
their histories."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import wait_until
from tests.support.gateways import RequestLog, RunningGateway, own_gateway
from tests.support.models import REALTIME_MODEL as REALTIME
from tests.support.models import TEXT_MODEL as TEXT
from tests.support.models import VIDEO_MODEL as VIDEO

SECRET = "My bank PIN is 4921"
SDP_OFFER = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"


@dataclass(frozen=True)
class Dave:
    """What dave left behind before his key was deleted."""

    response_id: str
    video_id: str
    token: str
    key_id: int


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _dave_works(gateway: RunningGateway, key: str) -> Dave:
    base, auth = gateway.base_url, _auth(key)
    r = httpx.post(f"{base}/responses", json={"model": TEXT, "input": SECRET, "max_output_tokens": 1},
                   headers=auth, timeout=120)
    assert r.status_code == 200, r.text
    response_id = r.json()["id"]
    video = httpx.post(f"{base}/videos", json={"prompt": "dave's holiday", "model": VIDEO}, headers=auth,
                       timeout=60).json()["id"]
    wait_until(lambda: httpx.get(f"{base}/videos/{video}", headers=auth, timeout=60).json()["status"]
               == "completed", timeout=60, what="dave's video rendered")
    assert httpx.get(f"{base}/videos/{video}/content", headers=auth, timeout=60).status_code == 200
    token = httpx.post(f"{base}/realtime/sessions", json={"model": REALTIME}, headers=auth,
                       timeout=60).json()["client_secret"]["value"]
    rows = RequestLog(gateway.db).settled(path="/v1/responses")
    return Dave(response_id, video, token, rows[-1]["key_id"])


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningGateway, Dave, str]]:
    """dave's work, his key deleted and eve's key created right after, all with the CLI."""
    db = Path(tmp_path_factory.mktemp("identity")) / "gateway.sqlite"
    with own_gateway(db, "--video-seconds-per-step", "0.01") as gateway:
        dave = _dave_works(gateway, gateway.create_key("dave"))  # the newest key: its id was the next one
        assert gateway.cli("keys", "delete", "dave").returncode == 0
        eve = gateway.create_key("eve")
        yield gateway, dave, eve


def test_the_next_key_never_takes_a_deleted_keys_id(scene: tuple[RunningGateway, Dave, str]) -> None:
    gateway, dave, eve = scene
    r = httpx.get(f"{gateway.base_url}/models", headers=_auth(eve), timeout=60)
    log = RequestLog(gateway.db).settled()
    eve_id = next(row["key_id"] for row in log if row["request_id"] == r.headers["x-request-id"])
    assert eve_id is not None and eve_id != dave.key_id
    # the request log keeps dave's history apart: nothing eve does lands under his id
    assert all(row["path"] != "/v1/models" for row in log if row["key_id"] == dave.key_id)


def test_a_deleted_keys_stored_response_is_404_to_the_next_key(scene: tuple[RunningGateway, Dave, str]) -> None:
    gateway, dave, eve = scene
    r = httpx.get(f"{gateway.base_url}/responses/{dave.response_id}", headers=_auth(eve), timeout=60)
    assert r.status_code == 404 and SECRET not in r.text
    follow = {"model": TEXT, "input": "and?", "max_output_tokens": 1, "previous_response_id": dave.response_id}
    r = httpx.post(f"{gateway.base_url}/responses", json=follow, headers=_auth(eve), timeout=60)
    assert r.status_code == 404 and r.json()["error"]["code"] == "previous_response_not_found"


def test_a_deleted_keys_video_is_404_and_unlisted_to_the_next_key(scene: tuple[RunningGateway, Dave, str]) -> None:
    gateway, dave, eve = scene
    base = gateway.base_url
    for method, path in [("GET", f"/videos/{dave.video_id}"), ("GET", f"/videos/{dave.video_id}/content"),
                         ("DELETE", f"/videos/{dave.video_id}")]:
        assert httpx.request(method, base + path, headers=_auth(eve), timeout=60).status_code == 404, path
    listed = httpx.get(f"{base}/videos", headers=_auth(eve), timeout=60).json()["data"]
    assert dave.video_id not in [v["id"] for v in listed]


def test_a_deleted_keys_token_is_refused(scene: tuple[RunningGateway, Dave, str]) -> None:
    gateway, dave, _ = scene
    r = httpx.post(f"{gateway.base_url}/realtime?model={REALTIME}", content=SDP_OFFER, timeout=60,
                   headers={"Content-Type": "application/sdp", **_auth(dave.token)})
    assert r.status_code == 401, r.text


def test_a_deleted_keys_data_is_gone_from_the_database(scene: tuple[RunningGateway, Dave, str]) -> None:
    gateway, dave, _ = scene
    with sqlite3.connect(gateway.db) as conn:
        left = {table: conn.execute(f"SELECT COUNT(*) FROM {table} WHERE key_id = ?", (dave.key_id,)).fetchone()[0]
                for table in ("responses", "tasks", "ephemeral_tokens")}
        files = conn.execute("SELECT COUNT(*) FROM task_content WHERE task_id = ?", (dave.video_id,)).fetchone()[0]
    assert left == {"responses": 0, "tasks": 0, "ephemeral_tokens": 0} and files == 0
    # nor left in the file's free pages or its write-ahead log (secure_delete, then a checkpoint)
    files_on_disk = [p for p in gateway.db.parent.iterdir() if p.name.startswith(gateway.db.name)]
    assert not [p.name for p in files_on_disk if SECRET.encode() in p.read_bytes()]
