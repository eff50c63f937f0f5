"""Video tasks client: the real local gateway's task API, and lost submissions (faults injected).

Live tests run through the sync `Gateway` and the `AsyncGateway`. `httpx.MockTransport` is used only
to lose the answer of a submission the gateway received, to check that `create` looks the task up
before it would create a second billable one (spec, Errors rule 2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gwlab.errors import ConnectionFailed, InvalidRequest, NotFound, ServerError, Timeout
from tests.support.faces import FACES, Face, logged, open_face
from tests.support.fakes import BASE_URL, CANARY_KEY
from tests.support.models import VIDEO_MODEL

VIDEO = VIDEO_MODEL


# --- the real gateway -------------------------------------------------------------------------------------


def test_create_and_wait_then_download_picks_the_parser_by_content_type(face: Face):
    videos = face.gw.videos
    video = face.run(videos.create_and_wait(f"a red ball bouncing ({face.kind})", model=VIDEO, seconds=4,
                                            size="1280x720", timeout=120))
    assert video.is_completed and video.progress == 100 and video.size == "1280x720" and video.seconds == "4"
    mp4 = face.run(videos.download(video.id))
    assert isinstance(mp4, bytes) and mp4[4:8] == b"ftyp"
    png = face.run(videos.download(video.id, "thumbnail"))
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG\r\n\x1a\n")
    image = face.run(videos.download(video.id, "thumbnail", as_image=True))
    assert image.size == (1280, 720)
    listed = face.run(videos.list(limit=5))
    assert video.id in [item.id for item in listed.data]
    assert face.run(videos.delete(video.id))["deleted"] is True
    with pytest.raises(NotFound):
        face.run(videos.get(video.id))


def test_wait_raises_timeout_at_its_deadline_polling_as_the_gateway_asks(face: Face):
    video = face.run(face.gw.videos.create(f"a slow sunrise ({face.kind})", model=VIDEO, seconds=12))
    started = time.monotonic()
    with pytest.raises(Timeout) as late:
        face.run(face.gw.videos.wait(video.id, timeout=1.5))
    assert 1.4 <= time.monotonic() - started < 10 and video.id in str(late.value)
    polls = [row for row in face.gw.ledger.entries() if row.path == f"/videos/{video.id}"]
    assert len(polls) >= 4  # openai-poll-after-ms (200 ms here), not the 1 s default
    face.run(face.gw.videos.delete(video.id))


def test_content_before_completion_is_the_gateway_s_404(face: Face):
    video = face.run(face.gw.videos.create(f"a blue square ({face.kind})", model=VIDEO))
    with pytest.raises(NotFound) as early:
        face.run(face.gw.videos.download(video.id))
    assert early.value.code == "video_not_ready"
    face.run(face.gw.videos.delete(video.id))


def test_path_parameters_are_url_encoded(face: Face):
    with pytest.raises(NotFound):
        face.run(face.gw.videos.get("no/such video?"))
    assert face.gw.ledger.entries()[-1].path == "/videos/no%2Fsuch%20video%3F"


def test_an_invalid_submission_is_refused_before_sending(face: Face, gateway):
    before = logged(gateway.db, "/v1/videos")
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.videos.create("a cat", model=VIDEO, seconds=5))
    assert refused.value.field == "seconds" and logged(gateway.db, "/v1/videos") == before
    assert len(face.gw.ledger) == 0


# --- lost submissions (faults injected) -----------------------------------------------------------------


def video(video_id: str, prompt: str = "a cat", *, model: str = VIDEO, created_at: float | None = None,
          status: str = "queued") -> dict[str, Any]:
    return {"id": video_id, "object": "video", "model": model, "status": status, "progress": 0,
            "created_at": int(time.time() if created_at is None else created_at), "completed_at": None,
            "expires_at": None, "prompt": prompt, "size": "720x1280", "seconds": "4",
            "remixed_from_video_id": None, "error": None}


class FakeTasks:
    """A gateway whose first `losses` submissions are received but their answers lost (by `loss`)."""

    def __init__(self, loss: str, listed: Callable[[], list[dict[str, Any]]], *, list_fails: bool = False,
                 losses: int = 1) -> None:
        self.loss, self.listed, self.list_fails, self.losses = loss, listed, list_fails, losses
        self.posts: list[httpx.Request] = []
        self.lists: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/videos":
            self.posts.append(request)
            if len(self.posts) <= self.losses:
                if self.loss == "read timeout":
                    raise httpx.ReadTimeout("no answer in time", request=request)
                if self.loss == "connection reset":
                    raise httpx.RemoteProtocolError("peer closed the connection", request=request)
                if self.loss == "502":
                    return httpx.Response(502, json={"error": {"message": "bad gateway"}})
                if self.loss == "never connected":
                    raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(200, json=video("video_second"))
        if request.method == "GET" and request.url.path == "/v1/videos":
            self.lists.append(request)
            if self.list_fails:
                raise httpx.ReadError("the lookup failed too", request=request)
            data = self.listed()
            return httpx.Response(200, json={"object": "list", "data": data, "has_more": False,
                                             "first_id": data[0]["id"] if data else None,
                                             "last_id": data[-1]["id"] if data else None})
        return httpx.Response(404, json={"error": {"message": "not here"}})


def fake_face(kind: str, handler: FakeTasks):
    return open_face(kind, BASE_URL, CANARY_KEY, http_transport=httpx.MockTransport(handler), max_retries=0)


LOSSES = ["read timeout", "connection reset", "502"]


@pytest.mark.parametrize("kind", FACES)
@pytest.mark.parametrize("loss", LOSSES)
def test_a_lost_submission_that_created_its_task_is_found_and_not_resubmitted(kind, loss):
    accepted = video("video_first", "a cat")
    fake = FakeTasks(loss, lambda: [accepted, video("video_other", "a dog")])
    with fake_face(kind, fake) as face:
        task = face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert task.id == "video_first" and len(fake.posts) == 1 and len(fake.lists) == 1
    assert fake.lists[0].url.params["order"] == "desc"


@pytest.mark.parametrize("kind", FACES)
@pytest.mark.parametrize("loss", LOSSES)
def test_a_lost_submission_without_a_task_is_resubmitted_once(kind, loss):
    hour_ago = time.time() - 3600
    others = [video("video_old", "a cat", created_at=hour_ago),  # an earlier submission of the same prompt
              video("video_dog", "a dog"), video("video_sora", "a cat", model="sora-2")]
    fake = FakeTasks(loss, lambda: others)
    with fake_face(kind, fake) as face:
        task = face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert task.id == "video_second" and len(fake.posts) == 2 and len(fake.lists) == 1
    assert fake.posts[0].content == fake.posts[1].content  # the same submission, once more


@pytest.mark.parametrize("kind", FACES)
def test_a_task_this_client_already_returned_is_never_taken_for_a_lost_submission(kind):
    fake = FakeTasks("none", lambda: [video("video_second", "a cat"), video("video_first", "a cat")])
    with fake_face(kind, fake) as face:
        assert face.run(face.gw.videos.create("a cat", model=VIDEO)).id == "video_second"  # answered
        fake.posts.clear()
        fake.loss = "read timeout"  # the same prompt again, answer lost: the newest match is taken...
        task = face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert task.id == "video_first" and len(fake.posts) == 1  # ...but never one returned before


@pytest.mark.parametrize("kind", FACES)
def test_a_failed_lookup_raises_the_original_error_and_never_resubmits(kind):
    fake = FakeTasks("read timeout", lambda: [], list_fails=True)
    with fake_face(kind, fake) as face, pytest.raises(Timeout) as lost:
        face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert len(fake.posts) == 1 and len(fake.lists) == 1
    assert any("videos.list()" in note for note in lost.value.__notes__)


@pytest.mark.parametrize("kind", FACES)
def test_a_connection_that_never_opened_is_raised_without_a_lookup(kind):
    fake = FakeTasks("never connected", lambda: [])
    with fake_face(kind, fake) as face, pytest.raises(ConnectionFailed):
        face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert len(fake.posts) == 1 and fake.lists == []


@pytest.mark.parametrize("kind", FACES)
def test_a_second_loss_after_the_resubmission_is_raised(kind):
    fake = FakeTasks("502", lambda: [], losses=2)
    with fake_face(kind, fake) as face, pytest.raises(ServerError) as lost:
        face.run(face.gw.videos.create("a cat", model=VIDEO))
    assert any("second submission" in note for note in lost.value.__notes__)
    assert len(fake.posts) == 2 and len(fake.lists) == 1  # looked up once, resubmitted once, no more
