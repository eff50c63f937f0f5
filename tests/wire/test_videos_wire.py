"""gwlab.wire.videos: the video create body, list/content parameters, typed video objects."""

from __future__ import annotations

from typing import Any

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import videos
from gwlab.wire.limits import VIDEO_VARIANTS

# protocols.md §8, verbatim
VIDEO = {"id": "video_gw1", "object": "video", "model": "sora-2", "status": "in_progress", "progress": 50,
         "created_at": 1767225600, "completed_at": None, "expires_at": None, "prompt": "a cat",
         "size": "720x1280", "seconds": "4", "remixed_from_video_id": None, "error": None}


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        call(*args, **kwargs)
    return info.value


def test_create_body_omits_unset_options() -> None:
    assert videos.build_create("a cat", "sora-2") == {"prompt": "a cat", "model": "sora-2"}


def test_create_body_sends_seconds_as_a_string() -> None:
    body = videos.build_create("a cat", "sora-2", seconds=8, size="1280x720", input_reference=None)
    assert body == {"prompt": "a cat", "model": "sora-2", "seconds": "8", "size": "1280x720"}


@pytest.mark.parametrize("seconds", [5, "5", "4s", True, 4.0])
def test_create_with_a_duration_outside_the_enum_is_refused_showing_what_was_given(seconds: Any) -> None:
    error = refused(videos.build_create, "a cat", "sora-2", seconds=seconds)
    assert error.field == "seconds" and str(error).endswith(f"got {seconds!r}")  # 5, not its wire form '5'


def test_create_with_an_unknown_size_is_refused() -> None:
    error = refused(videos.build_create, "a cat", "sora-2", size="1920x1080")
    assert error.field == "size" and "720x1280" in str(error)


def test_create_with_an_empty_prompt_is_refused() -> None:
    assert refused(videos.build_create, " ", "sora-2").field == "prompt"


def test_remix_body_is_the_prompt() -> None:
    assert videos.build_remix("now a dog") == {"prompt": "now a dog"}


def test_content_variants_come_from_the_limits() -> None:
    assert videos.content_params() == {"variant": "video"}
    assert [videos.content_params(v)["variant"] for v in VIDEO_VARIANTS] == list(VIDEO_VARIANTS)
    assert refused(videos.content_params, "poster").field == "variant"


def test_list_params_are_checked_and_unset_ones_omitted() -> None:
    assert videos.list_params() == {}
    assert videos.list_params(limit=100, order="asc", after="video_1") == {
        "limit": 100, "order": "asc", "after": "video_1"}
    assert refused(videos.list_params, limit=101).field == "limit"
    assert refused(videos.list_params, order="newest").field == "order"


def test_video_object_is_typed() -> None:
    video = videos.parse_video(VIDEO)
    assert (video.id, video.status, video.progress, video.seconds, video.size) == (
        "video_gw1", "in_progress", 50, "4", "720x1280")
    assert not video.is_terminal and not video.is_completed


def test_unknown_video_fields_are_kept_in_raw() -> None:
    video = videos.parse_video({**VIDEO, "gwlab_preview": True})
    assert video.raw["gwlab_preview"] is True


def test_failed_video_is_terminal_and_carries_its_error() -> None:
    video = videos.parse_video({**VIDEO, "status": "failed", "error": {"code": "render", "message": "no GPU"}})
    assert video.is_terminal and video.is_failed and video.error_message == "no GPU"


@pytest.mark.parametrize(("status", "terminal"), [
    ("queued", False), ("in_progress", False), ("completed", True), ("failed", True), ("cancelled", True),
    (None, False)])
def test_terminal_statuses_end_polling(status: str | None, terminal: bool) -> None:
    assert videos.is_terminal(status) is terminal


def test_malformed_video_values_read_as_none() -> None:
    video = videos.parse_video({"id": 3, "progress": "half", "seconds": 4, "created_at": "yesterday"})
    assert (video.id, video.progress, video.seconds, video.created_at) == (None, None, "4", None)
    assert videos.parse_video(["not", "a", "video"]).raw == {}


def test_video_repr_leaves_out_the_prompt() -> None:
    assert "a cat" not in repr(videos.parse_video(VIDEO))


def test_video_list_page_is_typed() -> None:
    page = videos.parse_video_list({"object": "list", "data": [VIDEO], "first_id": "video_gw1",
                                   "last_id": "video_gw1", "has_more": False})
    assert [video.id for video in page.data] == ["video_gw1"] and page.has_more is False


def test_poll_interval_follows_the_header_case_insensitively() -> None:
    assert videos.poll_after_seconds({"OpenAI-Poll-After-Ms": "2500"}) == 2.5
    assert videos.poll_after_seconds({}) == 1.0
    assert videos.poll_after_seconds({"openai-poll-after-ms": "soon"}) == 1.0
