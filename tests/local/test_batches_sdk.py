"""Both batch APIs of the embedded gateway, driven by the official openai and anthropic SDKs.

Files + batches (OpenAI) and message batches (Anthropic) run in the background on the local text model;
the claims: every line is answered exactly once (in the output or the error file), an invalid line fails
alone, a job expires or is cancelled part-way keeping what finished, survives a restart, and belongs to
the key that made it.

Gateways: the session's for what needs no setting; two of this module's own, each started once and
shared by the cases that need its settings (`capped`: every job expires once two of its lines ran,
uploads are capped; `paced`: a pause before each line, so a job is still running when a test acts on it).
Each case leaves its jobs ended, since a gateway runs its jobs one after the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support import wait_until
from tests.support.gateways import RunningGateway, make_key, own_gateway, start_gateway, stop_gateway
from tests.support.models import TEXT_MODEL

ENDPOINT = "/v1/chat/completions"
EXPIRE_AFTER, FILE_CAP = 2, 2000  # lines run before a job expires; bytes of the largest upload
# a pause before each line: 12 lines leave a cancel over 4 s to land part-way, after the first line ended
PACED = ("--batch-seconds-per-request", "0.4")


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """Every job expires once EXPIRE_AFTER of its lines ran (by count, not time); uploads capped at FILE_CAP."""
    db = tmp_path_factory.mktemp("capped") / "g.sqlite"
    with own_gateway(db, "--batch-expire-after", str(EXPIRE_AFTER), "--batch-file-max-bytes",
                     str(FILE_CAP)) as running:
        yield running


@dataclass
class Paced:
    """The paced gateway of this module; `stop` then `start` replace its process on the same database and key."""

    gateway: RunningGateway

    def stop(self) -> None:
        stop_gateway(self.gateway)

    def start(self) -> RunningGateway:
        self.gateway = start_gateway(self.gateway.db, *PACED, key=self.gateway.api_key)
        return self.gateway


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Paced]:
    holder = Paced(start_gateway(tmp_path_factory.mktemp("paced") / "g.sqlite", *PACED))
    try:
        yield holder
    finally:
        stop_gateway(holder.gateway)


def _line(cid: str, question: str = "2+2?") -> dict[str, Any]:
    return {"custom_id": cid, "method": "POST", "url": ENDPOINT,
            "body": {"model": TEXT_MODEL, "messages": [{"role": "user", "content": f"Q: {question}\nA:"}],
                     "max_tokens": 3, "temperature": 0}}


def _jsonl(lines: list[Any]) -> bytes:
    return "".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines).encode()


def _client(gateway: RunningGateway, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=key or gateway.api_key, max_retries=0)


def _anthropic(gateway: RunningGateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.api_host, api_key=gateway.api_key, max_retries=0)


def _submit(client: openai.OpenAI, lines: list[Any]) -> Any:
    file = client.files.create(file=("in.jsonl", _jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=file.id, endpoint=ENDPOINT, completion_window="24h",
                                 metadata={"run": "test"})


def _wait(client: openai.OpenAI, batch_id: str, until: tuple[str, ...] = ("completed", "expired", "cancelled",
                                                                          "failed")) -> Any:
    seen: list[Any] = []

    def done() -> bool:
        seen.append(client.batches.retrieve(batch_id))
        return seen[-1].status in until

    wait_until(done, timeout=240, interval=0.1, what=f"batch {batch_id} reaching {until}")
    return seen[-1]


def _lines_of(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(x) for x in client.files.content(file_id).text.splitlines() if x.strip()]


def test_a_batch_answers_every_line_once_and_fails_only_the_invalid_ones(gateway: RunningGateway) -> None:
    client = _client(gateway)
    bad_url = {**_line("r-bad-url"), "url": "/v1/responses"}
    lines = [_line("r1"), "{not json", _line("r2", "Capital of France?"), bad_url, _line("r1"),
             {**_line("r-no-model"), "body": {"messages": []}}]
    batch = _submit(client, lines)
    assert batch.status == "validating" and batch.metadata == {"run": "test"}
    batch = _wait(client, batch.id)
    assert batch.status == "completed"
    out, err = _lines_of(client, batch.output_file_id), _lines_of(client, batch.error_file_id)
    assert sorted(x["custom_id"] for x in out) == ["r1", "r2"]
    assert all(x["response"]["status_code"] == 200 and x["response"]["body"]["object"] == "chat.completion"
               and x["response"]["body"]["usage"]["completion_tokens"] >= 1 for x in out)
    assert sorted(str(x["custom_id"]) for x in err) == ["None", "r-bad-url", "r-no-model", "r1"]  # r1: duplicate
    assert batch.request_counts.total == 6 and batch.request_counts.completed == 2
    assert batch.request_counts.failed == 4
    assert len({x["id"] for x in out + err}) == 6  # one result per input line, none twice


def test_batches_and_files_list_and_belong_to_their_key(gateway: RunningGateway) -> None:
    client = _client(gateway)
    batch = _submit(client, [_line("only")])
    assert batch.id in [b.id for b in client.batches.list(limit=100)]
    assert batch.input_file_id in [f.id for f in client.files.list()]
    other = _client(gateway, make_key(gateway.db, "batches-other-key"))  # unique: the test may repeat
    with pytest.raises(openai.NotFoundError):
        other.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        other.files.content(batch.input_file_id)
    with pytest.raises(openai.NotFoundError):
        other.batches.create(input_file_id=batch.input_file_id, endpoint=ENDPOINT, completion_window="24h")
    assert batch.id not in [b.id for b in other.batches.list()]
    _wait(client, batch.id)


def test_a_batch_that_expires_part_way_keeps_its_finished_lines(capped: RunningGateway) -> None:
    client = _client(capped)
    batch = _wait(client, _submit(client, [_line(f"r{i}") for i in range(6)]).id)
    assert batch.status == "expired" and batch.expired_at is not None
    out, err = _lines_of(client, batch.output_file_id), _lines_of(client, batch.error_file_id)
    assert len(out) == EXPIRE_AFTER and all(x["response"]["status_code"] == 200 for x in out)
    assert len(err) == 6 - EXPIRE_AFTER and {x["error"]["code"] for x in err} == {"batch_expired"}
    assert sorted(x["custom_id"] for x in out + err) == [f"r{i}" for i in range(6)]


def test_a_cancelled_batch_keeps_what_finished_and_stops(paced: Paced) -> None:
    client = _client(paced.gateway)
    batch = _submit(client, [_line(f"r{i}") for i in range(12)])
    _wait_counts(client, batch.id, 1)
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    batch = _wait(client, batch.id)
    assert batch.status == "cancelled" and batch.cancelled_at is not None
    out, err = _lines_of(client, batch.output_file_id), _lines_of(client, batch.error_file_id)
    assert 1 <= len(out) < 12 and {x["error"]["code"] for x in err} == {"batch_cancelled"}
    assert sorted(x["custom_id"] for x in out + err) == sorted(f"r{i}" for i in range(12))


def _wait_counts(client: openai.OpenAI, batch_id: str, at_least: int) -> None:
    wait_until(lambda: client.batches.retrieve(batch_id).request_counts.completed >= at_least, timeout=120,
               interval=0.05, what=f"{at_least} line(s) of {batch_id} done")


def test_a_batch_survives_a_gateway_restart_without_running_a_line_twice(paced: Paced) -> None:
    client = _client(paced.gateway)
    batch = _submit(client, [_line(f"r{i}") for i in range(8)])
    _wait_counts(client, batch.id, 2)
    paced.stop()
    stopped = _stored(paced.gateway, batch.id)  # what the restarted gateway starts from: a job part-way
    assert stopped["status"] == "in_progress" and 2 <= stopped["request_counts"]["completed"] < 8
    client = _client(paced.start())
    done = _wait(client, batch.id)
    assert done.status == "completed" and done.request_counts.completed == 8
    out = _lines_of(client, done.output_file_id)
    assert sorted(x["custom_id"] for x in out) == [f"r{i}" for i in range(8)]  # each once


def _stored(gateway: RunningGateway, batch_id: str) -> dict[str, Any]:
    """A batch as the (stopped) gateway's database holds it."""
    from gwlab.local.store import Store

    store = Store(str(gateway.db))
    try:
        return next(job for job_id, _, job in store.tasks_of_kind("batch") if job_id == batch_id)
    finally:
        store.close()


def test_an_upload_over_the_cap_is_refused_and_not_kept(capped: RunningGateway) -> None:
    client = _client(capped, make_key(capped.db, "cap"))  # a key of its own: no file of another case listed
    big = _jsonl([_line(f"r{i}") for i in range(40)])
    assert len(big) > FILE_CAP
    stored = capped.db.parent / "g-files"
    kept = set(stored.glob("*.upload"))  # the other cases' files (stored under this suffix too)
    with pytest.raises(openai.APIStatusError) as info:
        client.files.create(file=("big.jsonl", big), purpose="batch")
    assert info.value.status_code == 413
    assert client.files.list().data == []
    assert set(stored.glob("*.upload")) == kept  # the refused upload left no partial file
    small = client.files.create(file=("s.jsonl", _jsonl([_line("a")])), purpose="batch")
    assert small.bytes == len(_jsonl([_line("a")])) and small.purpose == "batch"


def test_a_file_for_another_purpose_or_a_bad_window_is_refused(gateway: RunningGateway) -> None:
    client = _client(gateway)
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.files.create(file=("x.jsonl", b"{}\n"), purpose="assistants")
    file = client.files.create(file=("x.jsonl", _jsonl([_line("a")])), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        client.batches.create(input_file_id=file.id, endpoint=ENDPOINT, completion_window="1h")  # type: ignore[arg-type]


def test_message_batches_with_the_anthropic_sdk(gateway: RunningGateway) -> None:
    client = _anthropic(gateway)
    params = {"model": TEXT_MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "Q: 2+2?\nA:"}]}
    batch = client.messages.batches.create(requests=[
        {"custom_id": "a", "params": params}, {"custom_id": "b", "params": {**params, "max_tokens": -1}},
        {"custom_id": "c", "params": params}])
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 3

    def ended() -> bool:
        return client.messages.batches.retrieve(batch.id).processing_status == "ended"

    wait_until(ended, timeout=240, interval=0.1, what="message batch ending")
    done = client.messages.batches.retrieve(batch.id)
    assert (done.request_counts.succeeded, done.request_counts.errored) == (2, 1)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["a"].type == "succeeded" and results["a"].message.usage.output_tokens >= 1
    assert results["b"].type == "errored"
    assert batch.id in [b.id for b in client.messages.batches.list()]


def test_message_batch_duplicate_ids_are_refused_at_creation(gateway: RunningGateway) -> None:
    params = {"model": TEXT_MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(anthropic.BadRequestError, match="'x'"):
        _anthropic(gateway).messages.batches.create(requests=[{"custom_id": "x", "params": params}] * 2)


def _ended(client: anthropic.Anthropic, batch_id: str) -> None:
    wait_until(lambda: client.messages.batches.retrieve(batch_id).processing_status == "ended",
               timeout=60, interval=0.1, what="cancel ending the batch")


def test_a_message_batch_cancelled_part_way(paced: Paced) -> None:
    client = _anthropic(paced.gateway)
    params = {"model": TEXT_MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "Q: hi\nA:"}]}
    batch = client.messages.batches.create(requests=[{"custom_id": f"r{i}", "params": params}
                                                     for i in range(10)])
    wait_until(lambda: client.messages.batches.retrieve(batch.id).request_counts.succeeded >= 1,
               timeout=120, interval=0.05, what="one request done")
    client.messages.batches.cancel(batch.id)
    _ended(client, batch.id)
    kinds = [r.result.type for r in client.messages.batches.results(batch.id)]
    assert len(kinds) == 10 and "canceled" in kinds and kinds.count("succeeded") >= 1
    assert set(kinds) <= {"succeeded", "canceled"}
    done = client.messages.batches.retrieve(batch.id)
    assert done.cancel_initiated_at is not None and done.request_counts.processing == 0


def test_results_of_a_running_message_batch_are_not_served(paced: Paced) -> None:
    gateway, client = paced.gateway, _anthropic(paced.gateway)
    params = {"model": TEXT_MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    # ten paced requests: the job runs for over 4 s, the GET follows its creation at once
    batch = client.messages.batches.create(requests=[{"custom_id": f"r{i}", "params": params} for i in range(10)])
    r = httpx.get(f"{gateway.base_url}/messages/batches/{batch.id}/results",
                  headers={"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01"})
    assert r.status_code == 404 and r.json()["type"] == "error"
    client.messages.batches.cancel(batch.id)  # ended, so the next case's job is not queued behind it
    _ended(client, batch.id)
