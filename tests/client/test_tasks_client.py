"""Any task API reached by a description only: a differently shaped app (tests/support/task_app.py), no new code.

The same generic client drives the embedded gateway's videos and images (their own tests) and this
third family: nested id and status fields, upper-case statuses, millisecond times, ids that must be
URL-encoded, results in three media types.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gwlab.errors import InvalidRequest, Timeout
from tests.support.faces import FACES, Face, open_face
from tests.support.task_app import FAMILY, KEY, LoseAnswers, Server, serving


@pytest.fixture(scope="module")
def app() -> Iterator[Server]:
    with serving() as server:
        yield server


@pytest.fixture(params=FACES)
def face(request: pytest.FixtureRequest, app: Server) -> Iterator[Face]:
    with open_face(request.param, app.base_url, KEY) as opened:
        yield opened


def test_a_described_family_is_submitted_polled_and_downloaded(face: Face, app: Server):
    client = face.gw.tasks(FAMILY)
    task = face.run(client.create(f"a fox ({face.kind})", model="wanx-v1", params={"parameters.n": 1}))
    assert task.state == "queued" and task.status == "PENDING" and " " in task.id and "?" in task.id
    done = face.run(client.wait(task.id, poll_interval=0.01, timeout=30))
    assert done.is_completed and done.status == "SUCCEEDED" and done.created_at < 1e11  # ms read as seconds
    # the path parameter went out URL-encoded: unencoded, '?' would have cut the id and missed the task
    assert any(entry.path == f"/tasks/{task.id.replace(' ', '%20').replace('?', '%3F')}"
               for entry in face.gw.ledger.entries())


def test_downloads_are_parsed_by_their_content_type_never_as_json_by_guess(face: Face):
    client = face.gw.tasks(FAMILY)
    task = face.run(client.create("a heron", model="wanx-v1"))
    face.run(client.wait(task.id, poll_interval=0.01, timeout=30))
    png = face.run(client.download(task.id))
    assert png.media_type == "image/png" and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert face.run(client.download(task.id, "meta")) == {"task_id": task.id, "width": 64, "height": 48}
    assert face.run(client.download(task.id, "caption")) == "caption of a heron"
    with pytest.raises(InvalidRequest) as refused:
        face.run(client.download(task.id, "gif"))
    assert refused.value.field == "variant"


def test_a_failed_task_is_returned_with_its_message_and_a_cancel_is_terminal(face: Face):
    client = face.gw.tasks(FAMILY)
    failed = face.run(client.wait(face.run(client.create("please fail", model="m")).id, poll_interval=0.01,
                                  timeout=30))
    assert failed.is_failed and failed.error_message == "the prompt asked to fail"
    cancelled = face.run(client.cancel(face.run(client.create("stop me", model="m")).id))
    assert cancelled.is_cancelled and cancelled.is_terminal


def test_wait_raises_timeout_naming_the_task(face: Face):
    client = face.gw.tasks(FAMILY)
    task = face.run(client.create("running forever", model="m"))
    with pytest.raises(Timeout) as late:
        face.run(client.wait(task.id, poll_interval=0.01, timeout=0.2))
    assert task.id in str(late.value)


@pytest.mark.parametrize("kind", FACES)
def test_a_lost_submission_is_found_through_the_described_listing_and_not_resent(kind, app: Server):
    lose = LoseAnswers(FAMILY.submit_path)
    with open_face(kind, app.base_url, KEY, http_transport=lose, max_retries=0) as face:
        before = app.submissions
        task = face.run(face.gw.tasks(FAMILY).create(f"a lost lynx ({kind})", model="wanx-v1"))
    assert lose.lost and app.submissions == before + 1  # received once, answer lost, found, not resent
    assert app.tasks[task.id]["prompt"] == f"a lost lynx ({kind})"


def test_a_description_is_required():
    with open_face("sync", "http://127.0.0.1:9/v1", KEY) as face, pytest.raises(InvalidRequest) as refused:
        face.gw.tasks({"submit_path": "/x"})
    assert refused.value.field == "family"
