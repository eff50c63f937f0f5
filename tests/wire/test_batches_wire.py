"""The batch shapes of both providers: ids, limits, JSONL lines, result collation, batch objects."""

from __future__ import annotations

import json

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.jobs import batches as wb


def _out(cid: str, content: str = "hi") -> dict:
    body = {"choices": [{"message": {"content": content}}]}
    return {"id": f"batch_req_{cid}", "custom_id": cid, "error": None,
            "response": {"status_code": 200, "request_id": "r", "body": body}}


def _err(cid: str | None, code: str = "invalid_request", status: int | None = None) -> dict:
    if status is not None:
        return {"id": "x", "custom_id": cid, "error": None,
                "response": {"status_code": status, "body": {"error": {"message": "bad", "code": code}}}}
    return {"id": "x", "custom_id": cid, "response": None, "error": {"code": code, "message": "no"}}


def _jsonl(*objs: dict) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


def test_duplicate_custom_ids_are_refused_naming_them() -> None:
    with pytest.raises(InvalidRequest, match="'b'") as info:
        wb.check_custom_ids(["a", "b", "c", "b"])
    assert info.value.field == "custom_id"


def test_anthropic_custom_ids_must_be_its_form() -> None:
    wb.check_custom_ids(["row_1", "row-2"], wb.ANTHROPIC_BATCHES)
    with pytest.raises(InvalidRequest, match="row 3"):
        wb.check_custom_ids(["row 3"], wb.ANTHROPIC_BATCHES)
    with pytest.raises(InvalidRequest):
        wb.check_custom_ids([""])


def test_limits_are_the_providers() -> None:
    assert (wb.OPENAI_BATCHES.max_requests, wb.OPENAI_BATCHES.max_bytes) == (50_000, 200 * 1024 * 1024)
    assert (wb.ANTHROPIC_BATCHES.max_requests, wb.ANTHROPIC_BATCHES.max_bytes) == (100_000, 256 * 1024 * 1024)


def test_split_keeps_every_chunk_within_count_and_bytes() -> None:
    sizes = [10] * 25 + [400] + [10] * 5
    chunks = wb.split_by_limits(sizes, wb.OPENAI_BATCHES, max_requests=10, max_bytes=450)
    assert [i for c in chunks for i in c] == list(range(len(sizes)))  # every request once, in order
    assert all(len(c) <= 10 and sum(sizes[i] for i in c) <= 450 for c in chunks)
    assert [len(c) for c in chunks] == [10, 10, 6, 5]  # the third ends on the 400-byte request: 450 exactly


def test_split_never_exceeds_the_provider_even_when_asked_for_more() -> None:
    chunks = wb.split_by_limits([1] * 50_001, wb.OPENAI_BATCHES, max_requests=10**9)
    assert [len(c) for c in chunks] == [50_000, 1]


def test_one_request_over_the_byte_limit_is_named() -> None:
    with pytest.raises(InvalidRequest) as info:
        wb.split_by_limits([5, 500, 5], wb.OPENAI_BATCHES, max_bytes=100)
    assert info.value.field == "requests[1]"


def test_openai_lines_round_trip_through_the_server_check() -> None:
    data = wb.build_openai_jsonl([("r1", {"model": "m", "messages": []}), ("r2", {"model": "m"})],
                                 "/v1/chat/completions")
    lines = [obj for _, obj in wb.iter_jsonl(data)]
    assert [wb.check_openai_line(o, "/v1/chat/completions")[0] for o in lines] == ["r1", "r2"]
    assert lines[0] == {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
                        "body": {"model": "m", "messages": []}}


@pytest.mark.parametrize(("line", "field"), [
    ({"method": "POST", "url": "/v1/chat/completions", "body": {}}, "custom_id"),
    ({"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {}}, "method"),
    ({"custom_id": "a", "method": "POST", "url": "/v1/responses", "body": {}}, "url"),
    ({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": []}, "body"),
    ([1, 2], "line"),
])
def test_a_bad_input_line_names_its_field(line: object, field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        wb.check_openai_line(line, "/v1/chat/completions")
    assert info.value.field == field


def test_an_unknown_endpoint_is_refused_before_building() -> None:
    with pytest.raises(InvalidRequest, match="batch endpoint"):
        wb.build_openai_jsonl([("a", {})], "/v1/messages")


def test_collation_survives_order_missing_unknown_duplicates_and_errors() -> None:
    output = _jsonl(_out("c"), _out("a"), _out("zz"), _out("a", "second"))
    errors = _jsonl(_err("d", status=400), _err("b", "batch_expired")) + b"not json\n"
    got = wb.collate([output, errors], ["a", "b", "c", "d", "e"])
    assert got.results["a"].body["choices"][0]["message"]["content"] == "hi"  # the first line wins
    assert got.results["c"].ok and not got.results["d"].ok and got.results["d"].status_code == 400
    assert got.results["b"].kind == "expired"
    assert got.missing == ["e"] and got.unknown == ["zz"] and got.duplicates == ["a"] and got.unreadable == 1
    assert got.counts()["succeeded"] == 2 and got.counts()["errored"] == 1


def test_a_finished_line_also_reported_cancelled_keeps_its_answer() -> None:
    got = wb.collate([_jsonl(_err("a", "batch_cancelled")), _jsonl(_out("a"))], ["a"])
    assert got.results["a"].ok and got.duplicates == ["a"]


def test_anthropic_results_of_every_type() -> None:
    lines = _jsonl(
        {"custom_id": "s", "result": {"type": "succeeded", "message": {"id": "msg_1", "content": []}}},
        {"custom_id": "e", "result": {"type": "errored", "error": {"type": "error", "error": {
            "type": "invalid_request_error", "message": "max_tokens: required"}}}},
        {"custom_id": "c", "result": {"type": "canceled"}},
        {"custom_id": "x", "result": {"type": "expired"}})
    got = wb.collate([lines], ["s", "e", "c", "x"], wb.ANTHROPIC_BATCHES)
    assert [got.results[k].kind for k in "secx"] == ["succeeded", "errored", "canceled", "expired"]
    assert got.results["e"].error["message"] == "max_tokens: required"


def test_batch_objects_of_both_apis_read_alike() -> None:
    openai_job = wb.parse_job({"id": "batch_1", "object": "batch", "status": "expired", "created_at": 1700000000,
                               "request_counts": {"total": 9, "completed": 3, "failed": 6},
                               "output_file_id": "file-o", "error_file_id": "file-e",
                               "metadata": {"gwlab_submission": "t"}}, wb.OPENAI_BATCHES)
    assert (openai_job.terminal, openai_job.succeeded, openai_job.errored, openai_job.pending) == (True, 3, 6, 0)
    assert openai_job.metadata == {"gwlab_submission": "t"}
    msg = wb.parse_job({"id": "msgbatch_1", "type": "message_batch", "processing_status": "in_progress",
                        "created_at": "2026-11-27T10:00:00Z", "request_counts": {
                            "processing": 4, "succeeded": 1, "errored": 1, "canceled": 0, "expired": 0}},
                       wb.ANTHROPIC_BATCHES)
    assert (msg.terminal, msg.total, msg.pending, msg.succeeded) == (False, 6, 4, 1)
    assert msg.created_at == pytest.approx(1795773600.0)


def test_anthropic_requests_are_checked_naming_the_index() -> None:
    assert wb.check_anthropic_request({"custom_id": "a", "params": {"model": "m"}}, 0) == ("a", {"model": "m"})
    with pytest.raises(InvalidRequest) as info:
        wb.check_anthropic_request({"custom_id": "a"}, 3)
    assert info.value.field == "requests.3.params"


def test_a_jobs_timing_is_read_from_its_own_times_in_either_api() -> None:
    openai = wb.parse_job({"id": "b", "status": "completed", "created_at": 1000, "completed_at": 1090,
                           "expires_at": 1000 + 86400}, wb.OPENAI_BATCHES)
    assert wb.timing(openai) == (90.0, 86400.0)
    anthropic = wb.parse_job({"id": "m", "processing_status": "ended", "created_at": "2024-08-20T18:37:24Z",
                              "ended_at": "2024-08-20T18:39:04Z", "expires_at": "2024-08-21T18:37:24Z"},
                             wb.ANTHROPIC_BATCHES)
    assert wb.timing(anthropic) == (100.0, 86400.0)
    running = wb.parse_job({"id": "b", "status": "in_progress", "created_at": 1000}, wb.OPENAI_BATCHES)
    assert wb.timing(running) == (None, None)  # not ended, no window given: nothing is guessed
