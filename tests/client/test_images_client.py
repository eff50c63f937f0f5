"""gw.images against the real local gateway: submit, wait, download by Content-Type, and lost answers."""

from __future__ import annotations

import sqlite3

import pytest

from gwlab.errors import InvalidRequest, NotFound
from gwlab.wire.models import DEFAULT_MODELS
from tests.support.faces import FACES, Face, logged, open_face
from tests.support.task_app import LoseAnswers


def submissions(db) -> int:
    """POSTs of image tasks in the gateway's own request log."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM request_log WHERE method = 'POST' AND path = ?",
                            ("/v1/images/tasks",)).fetchone()[0]


def test_create_and_wait_then_download_a_png_and_its_thumbnail(face: Face):
    images = face.gw.images
    task = face.run(images.create_and_wait(f"a lantern ({face.kind})", size="1024x1024", timeout=120))
    assert task.is_completed and task.model == DEFAULT_MODELS["images"] and task.progress == 100
    png = face.run(images.download(task.id))
    assert png.media_type == "image/png" and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert face.run(images.download(task.id, "image", as_image=True)).size == (1024, 1024)
    assert face.run(images.download(task.id, "thumbnail", as_image=True)).size == (256, 256)
    assert task.id in [t.id for t in face.run(images.list(limit=5)).tasks]
    assert face.run(images.delete(task.id))["deleted"] is True
    with pytest.raises(NotFound):
        face.run(images.get(task.id))


def test_a_bad_size_is_refused_before_sending(face: Face, gateway):
    before = logged(gateway.db, "/v1/images/tasks")
    with pytest.raises(InvalidRequest) as refused:
        face.run(face.gw.images.create("a fox", size="1000x1000"))
    assert refused.value.field == "size" and logged(gateway.db, "/v1/images/tasks") == before


@pytest.mark.parametrize("kind", FACES)
def test_a_lost_image_submission_is_found_on_the_gateway_not_resubmitted(kind, gateway):
    lose = LoseAnswers("/images/tasks")
    before = submissions(gateway.db)
    with open_face(kind, gateway.base_url, gateway.api_key, http_transport=lose, max_retries=0) as face:
        task = face.run(face.gw.images.create(f"a lost lantern ({kind})"))
        assert face.run(face.gw.images.get(task.id)).prompt == f"a lost lantern ({kind})"
    assert lose.lost and task.id.startswith("imgtask_") and submissions(gateway.db) == before + 1
