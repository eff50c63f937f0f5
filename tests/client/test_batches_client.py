"""The batch client (`gw.batches`, `gw.message_batches`): both APIs, sync and async, and the refusals made
before anything is uploaded or paid."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gwlab.client.batches import BatchUnsupported
from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.errors import InvalidRequest
from tests.support import wait_until
from tests.support.gateways import RunningGateway
from tests.support.models import TEXT_MODEL

CHAT = {"model": TEXT_MODEL, "messages": [{"role": "user", "content": "Q: 2+2?\nA:"}], "max_tokens": 3}
PARAMS = {"model": TEXT_MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "Q: 2+2?\nA:"}]}


def _recording(status: int = 200) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={"error": {"message": "Unknown path", "type": "invalid_request_error",
                                                      "param": None, "code": None}})

    return httpx.MockTransport(handle), seen


@pytest.mark.parametrize(("setting", "refused"), [("none", ("batches", "message_batches")),
                                                  ("openai", ("message_batches",)),
                                                  ("anthropic", ("batches",))])
def test_a_dialect_without_a_batch_api_is_refused_before_sending(setting: str, refused: tuple[str, ...]) -> None:
    transport, seen = _recording()
    with Gateway("http://gw.example/v1", "sk-x", http_transport=transport, dialect={"batches": setting}) as gw:
        for name in refused:
            with pytest.raises(BatchUnsupported, match=r"http://gw\.example/v1") as info:
                if name == "batches":
                    gw.batches.submit([("a", CHAT)], endpoint="/v1/chat/completions")
                else:
                    gw.message_batches.submit([("a", PARAMS)])
            assert info.value.field == "dialect.batches"
    assert seen == []


def test_a_gateway_without_files_says_so_on_the_free_upload() -> None:
    transport, seen = _recording(404)
    with (Gateway("http://gw.example/v1", "sk-x", http_transport=transport) as gw,
          pytest.raises(BatchUnsupported, match=r"no openai batch API; nothing was submitted")):
        gw.batches.submit([("a", CHAT)], endpoint="/v1/chat/completions")
    assert [r.url.path for r in seen] == ["/v1/files"]  # the upload, never a create


def test_duplicate_ids_are_refused_before_upload() -> None:
    transport, seen = _recording()
    with Gateway("http://gw.example/v1", "sk-x", http_transport=transport) as gw:
        with pytest.raises(InvalidRequest, match="'a'"):
            gw.batches.submit([("a", CHAT), ("b", CHAT), ("a", CHAT)], endpoint="/v1/chat/completions")
        with pytest.raises(InvalidRequest, match="'a'"):
            gw.message_batches.submit([("a", PARAMS), ("a", PARAMS)])
    assert seen == []


def test_sync_openai_batches_end_to_end(gateway: RunningGateway) -> None:
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        job = gw.batches.submit([("x", CHAT), ("y", {**CHAT, "model": "no-such-model"})],
                                endpoint="/v1/chat/completions", metadata={"case": "sync"})
        assert job.metadata["case"] == "sync" and job.metadata["gwlab_submission"]
        assert gw.batches.find(job.metadata["gwlab_submission"]).id == job.id
        wait_until(lambda: gw.batches.retrieve(job.id).terminal, timeout=240, interval=0.1, what="batch ending")
        done = gw.batches.retrieve(job.id)
        got = gw.batches.results(done, ["x", "y", "z"])
        assert got.results["x"].ok and got.results["x"].body["object"] == "chat.completion"
        assert got.results["y"].kind == "errored" and got.results["y"].status_code == 404
        assert got.missing == ["z"]
        assert job.id in [j.id for j in gw.batches.list(limit=100)[0]]


def test_async_message_batches_end_to_end(gateway: RunningGateway) -> None:
    async def main() -> None:
        async with AsyncGateway(gateway.base_url, gateway.api_key) as gw:
            job = await gw.message_batches.submit([("p", PARAMS), ("q", PARAMS)])
            assert job.status == "in_progress" and job.total == 2
            for _ in range(2400):
                job = await gw.message_batches.retrieve(job.id)
                if job.terminal:
                    break
                await asyncio.sleep(0.1)
            got = await gw.message_batches.results(job, ["p", "q"])
            assert all(r.ok and r.body["type"] == "message" for r in got.results.values())
            raw = await gw.message_batches.results_bytes(job.id)
            assert sorted(json.loads(x)["custom_id"] for x in raw.decode().splitlines()) == ["p", "q"]

    asyncio.run(main())
