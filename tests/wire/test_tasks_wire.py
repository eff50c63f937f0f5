"""gwlab.wire.jobs.tasks: a task API described by data; typed tasks read through the description."""

from __future__ import annotations

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire import images
from gwlab.wire.jobs import tasks
from gwlab.wire.jobs.tasks import TaskFamily, build_submit, get_field, parse_page, parse_task
from gwlab.wire.videos import VIDEOS

# a differently shaped task API (DashScope's: nested id and status, upper-case states, no progress)
NESTED = TaskFamily(
    name="nested", submit_path="/services/image-synthesis", item_path="/tasks/{task_id}",
    content_path="/tasks/{task_id}/result", variant_param=None, list_path=None,
    id_field="output.task_id", status_field="output.task_status", progress_field=None, error_field="output.message",
    created_field="output.submit_time", prompt_field="input.prompt", model_field="model",
    queued=("PENDING",), completed=("SUCCEEDED",), failed=("FAILED",), cancelled=("CANCELED",))


def test_a_nested_description_reads_id_status_and_time_through_dotted_fields():
    task = parse_task(NESTED, {"output": {"task_id": "t-1", "task_status": "RUNNING",
                                          "submit_time": 1_767_225_600_000}, "request_id": "r"})
    assert (task.id, task.status, task.state) == ("t-1", "RUNNING", "in_progress")
    assert task.created_at == 1_767_225_600.0  # milliseconds read as seconds
    assert task.raw["request_id"] == "r" and not task.is_terminal


@pytest.mark.parametrize(("status", "state"), [("PENDING", "queued"), ("SUCCEEDED", "completed"),
                                               ("FAILED", "failed"), ("CANCELED", "cancelled")])
def test_each_status_of_a_family_reads_as_one_of_the_common_states(status, state):
    assert NESTED.state(status) == state
    assert parse_task(NESTED, {"output": {"task_status": status}}).is_terminal == (state != "queued")


def test_a_submission_nests_dotted_fields_and_omits_unset_parameters():
    body = build_submit(NESTED, "a fox", "wanx-v1", {"parameters.size": "1024*1024", "parameters.n": None})
    assert body == {"model": "wanx-v1", "input": {"prompt": "a fox"}, "parameters": {"size": "1024*1024"}}
    assert get_field(body, "input.prompt") == "a fox" and get_field(body, "input.missing.deeper") is None


@pytest.mark.parametrize(("changes", "name"), [
    ({"item_path": "/tasks/{id}"}, "item_path"), ({"submit_path": "tasks"}, "submit_path"),
    ({"cancel_method": "GET", "cancel_path": "/tasks/{task_id}"}, "cancel_method"), ({"completed": ()}, "completed"),
])
def test_a_description_that_cannot_work_is_refused_naming_its_field(changes, name):
    fields = {"name": "x", "submit_path": "/tasks", "item_path": "/tasks/{task_id}", **changes}
    with pytest.raises(InvalidRequest) as refused:
        TaskFamily(**fields)
    assert refused.value.field == name


def test_an_unknown_variant_is_refused_naming_variant():
    assert VIDEOS.content_query() == {"variant": "video"}
    assert images.IMAGES.content_query("thumbnail") == {"variant": "thumbnail"}
    with pytest.raises(InvalidRequest) as refused:
        images.IMAGES.content_query("poster")
    assert refused.value.field == "variant"
    assert NESTED.content_query() == {}  # one file, no variant parameter


def test_an_empty_prompt_or_model_is_refused_before_sending():
    with pytest.raises(InvalidRequest) as prompt:
        build_submit(VIDEOS, "  ", "m")
    with pytest.raises(InvalidRequest) as model:
        build_submit(VIDEOS, "a cat", "")
    assert (prompt.value.field, model.value.field) == ("prompt", "model")


def test_a_listing_page_falls_back_to_the_last_item_id():
    page = parse_page(VIDEOS, {"data": [{"id": "a", "status": "queued"}, {"id": "b", "status": "completed"}],
                               "has_more": True})
    assert [t.id for t in page.tasks] == ["a", "b"] and page.last_id == "b" and page.has_more


def test_poll_after_reads_the_family_header_in_milliseconds():
    assert tasks.poll_after_seconds({"Openai-Poll-After-Ms": "250"}) == 0.25
    assert tasks.poll_after_seconds({"x-wait": "nan?"}, "x-wait", default=2.0) == 2.0
    assert tasks.poll_after_seconds({"openai-poll-after-ms": "250"}, None, default=3.0) == 3.0
