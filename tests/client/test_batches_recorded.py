"""The batch client against recorded provider responses (tests/client/batch_recordings/, replayed on loopback):
answers come back out of input order and beside an error file, and each lands on its own custom id.

The recordings are checked against the official schemas first (OpenAI's OpenAPI document; the `anthropic`
SDK's types), so these tests speak for the providers' shapes, not for shapes gwlab chose."""

from __future__ import annotations

import asyncio
import json

import pytest

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.wire.jobs import batches as wb
from tests.support.batch_replay import batch_replay, recording
from tests.support.contracts import anthropic_violations, batch_line_violations, violations

ENDPOINT = "/v1/chat/completions"
QUESTIONS = {"request-1": "What is 2+2?", "request-2": "What colour is the sky?",
             "request-3": "What is the capital of France?", "request-4": "Say hi."}
ANSWERS = {"request-1": "2 + 2 equals 4.", "request-2": "Blue, on a clear day.", "request-3": "Paris."}
MESSAGE_IDS = ("my-first-request", "my-second-request", "my-third-request", "my-fourth-request")


def _chat(cid: str) -> dict:
    return {"model": "gpt-4o-mini", "max_tokens": 64, "messages": [{"role": "user", "content": QUESTIONS[cid]}]}


def _params(cid: str) -> dict:
    return {"model": "claude-3-5-sonnet-20240620", "max_tokens": 64,
            "messages": [{"role": "user", "content": f"Hello ({cid})"}]}


@pytest.mark.parametrize(("name", "schema"), [
    ("openai_file.json", "OpenAIFile"), ("openai_batch_validating.json", "Batch"),
    ("openai_batch_in_progress.json", "Batch"), ("openai_batch_completed.json", "Batch"),
    ("openai_batches_list.json", "ListBatchesResponse")])
def test_each_openai_recording_matches_the_official_schema(name: str, schema: str) -> None:
    assert violations(recording(name), schema) == []


def test_each_recorded_result_line_matches_its_providers_schema() -> None:
    for name in ("openai_output.jsonl", "openai_errors.jsonl"):
        for line in recording(name).splitlines():
            obj = json.loads(line)
            assert batch_line_violations(obj, "BatchRequestOutput") == []
            if obj["response"]["status_code"] == 200:
                assert violations(obj["response"]["body"], "CreateChatCompletionResponse") == []
    for name in ("anthropic_batch_in_progress.json", "anthropic_batch_ended.json"):
        assert anthropic_violations(recording(name), "MessageBatch") == []
    for line in recording("anthropic_results.jsonl").splitlines():
        assert anthropic_violations(json.loads(line), "MessageBatchIndividualResponse") == []


def test_an_openai_batch_collects_out_of_order_answers_and_its_error_file_onto_their_own_ids() -> None:
    order = [json.loads(x)["custom_id"] for x in recording("openai_output.jsonl").splitlines()]
    assert order != sorted(order)  # the recording is out of input order
    with batch_replay() as (url, sent), Gateway(url, "sk-recorded") as gw:
        job = gw.batches.submit([(cid, _chat(cid)) for cid in QUESTIONS], endpoint=ENDPOINT)
        assert job.status == "validating" and not job.terminal
        while not job.terminal:
            job = gw.batches.retrieve(job.id)
        collation = gw.batches.results(job, list(QUESTIONS))
        ledger_rows = gw.batches.twin.record(collation, path="/chat/completions", model="gpt-4o-mini")
        usage = gw.usage
    lines = [json.loads(x) for x in sent.uploads[0].splitlines()]
    assert [x["custom_id"] for x in lines] == list(QUESTIONS)
    assert all(batch_line_violations(x, "BatchRequestInput") == [] for x in lines)
    assert violations(sent.creates[0], "CreateBatchRequest") == []
    assert (job.status, job.total, job.succeeded, job.errored) == ("completed", 4, 3, 1)
    assert {cid: r.body["choices"][0]["message"]["content"] for cid, r in collation.results.items() if r.ok} == ANSWERS
    failed = collation.results["request-4"]
    assert failed.kind == "errored" and failed.status_code == 400 and "max_tokens" in failed.error["message"]
    assert collation.counts() == {"succeeded": 3, "errored": 1, "canceled": 0, "expired": 0, "missing": 0,
                                  "unknown": 0, "duplicates": 0, "unreadable": 0}
    batch_rows = usage[usage["family"] == wb.LEDGER_FAMILY]
    assert ledger_rows == len(batch_rows) == 3
    assert (batch_rows["input_tokens"].sum(), batch_rows["output_tokens"].sum()) == (72, 27)  # the job's usage


def test_a_message_batch_collects_every_result_type_out_of_order() -> None:
    async def main() -> tuple[wb.BatchJob, wb.Collation, list]:
        with batch_replay() as (url, sent):
            async with AsyncGateway(url, "sk-recorded") as gw:
                job = await gw.message_batches.submit([(cid, _params(cid)) for cid in MESSAGE_IDS])
                assert job.status == "in_progress" and job.pending == 4
                while not job.terminal:
                    job = await gw.message_batches.retrieve(job.id)
                return job, await gw.message_batches.results(job, MESSAGE_IDS), sent.creates

    job, collation, creates = asyncio.run(main())
    assert [r["custom_id"] for r in creates[0]["requests"]] == list(MESSAGE_IDS)
    assert (job.status, job.total, job.succeeded, job.errored) == ("ended", 4, 2, 2)
    texts = {cid: r.body["content"][0]["text"] for cid, r in collation.results.items() if r.ok}
    assert texts == {"my-first-request": "Hello! How can I assist you today?",
                     "my-second-request": "Hello again! It's nice to see you."}
    third = collation.results["my-third-request"]
    assert third.kind == "errored" and third.error == {"type": "invalid_request_error",
                                                       "message": "max_tokens: Field required"}
    assert collation.results["my-fourth-request"].kind == "expired"
    assert collation.counts()["missing"] == collation.counts()["unknown"] == 0


def test_the_documented_batch_example_reads_with_its_nulls() -> None:
    job = wb.parse_job(recording("openai_batch_documented.json"), wb.OPENAI_BATCHES)
    assert (job.status, job.terminal, job.total, job.succeeded, job.errored, job.pending) == (
        "completed", True, 100, 95, 5, 0)
    assert job.output_file_id == "file-cvaTdG" and job.error_file_id == "file-HOWS94"
    assert job.metadata == {"customer_id": "user_123456789", "batch_description": "Nightly eval job"}
