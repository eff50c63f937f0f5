"""The one cursor rule of the local listings (`cursor_slice`): OpenAI's `after` (an unknown id is a 400 naming
the noun) and Anthropic's `after_id`/`before_id` (an unknown id is an empty page), both pages bounded by `limit`."""

from __future__ import annotations

import pytest

from gwlab.local.errors import APIError
from gwlab.local.jobs.task_worker import cursor_slice

JOBS = [{"id": f"j{i}"} for i in range(5, 0, -1)]  # j5 .. j1, newest first


def _ids(page: list[dict]) -> list[str]:
    return [j["id"] for j in page]


def test_after_gives_the_next_page_and_whether_more_follow() -> None:
    page, more = cursor_slice(JOBS, 2, "j5")
    assert (_ids(page), more) == (["j4", "j3"], True)
    page, more = cursor_slice(JOBS, 2, "j3")
    assert (_ids(page), more) == (["j2", "j1"], False)


def test_before_gives_the_page_just_before_the_cursor() -> None:
    page, more = cursor_slice(JOBS, 2, None, "j1")
    assert (_ids(page), more) == (["j3", "j2"], False)


def test_an_unknown_cursor_is_a_400_naming_the_noun_or_an_empty_page() -> None:
    with pytest.raises(APIError, match="'after' names no batch of this key"):
        cursor_slice(JOBS, 2, "nope", noun="batch")
    assert cursor_slice(JOBS, 2, "nope") == ([], False)
    assert cursor_slice(JOBS, 2, None, "nope") == ([], False)
