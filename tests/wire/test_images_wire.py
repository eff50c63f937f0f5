"""gwlab.wire.images: the image task description and its create body."""

from __future__ import annotations

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import images


def test_image_sizes_are_checked_before_sending():
    assert images.build_create("a fox", "m", "1024x1024") == {"model": "m", "prompt": "a fox", "size": "1024x1024"}
    with pytest.raises(InvalidRequest) as refused:
        images.build_create("a fox", "m", "1000x1000")
    assert refused.value.field == "size"


def test_the_image_family_reads_openai_task_statuses_including_cancelled():
    assert [images.IMAGES.state(s) for s in ("queued", "in_progress", "completed", "failed", "cancelled")] == \
        ["queued", "in_progress", "completed", "failed", "cancelled"]
    assert images.IMAGES.main_variant == "image" and images.IMAGES.cancel_path is not None
