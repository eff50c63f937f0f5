"""The throughput benchmark's stub gateway and its raw-socket floor (bench/frames_stub.py,
bench/frames_throughput.py): the stub answers decisions after its latency and refuses what it cannot
serve; the floor builds the same tidy columns as the hand-written loops. No timing is asserted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from bench.frames_throughput import QUESTIONS, hand_written, raw_loop, start_stub, texts


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    process, url = start_stub(0.001)
    try:
        yield url
    finally:
        process.terminate()
        process.wait()


def test_the_raw_floor_builds_the_same_columns_as_the_httpx_loop(stub: str) -> None:
    rows = texts(40)
    raw = asyncio.run(raw_loop(stub, rows, 4))
    hand = asyncio.run(hand_written(stub, rows, 4))
    assert len(raw) == 40 and sorted(raw.columns) == sorted(hand.columns)
    assert set(raw["urgent__noul"]) == {0.7} and (raw["__input_tokens"] > 10 * len(QUESTIONS)).all()


def test_the_stub_answers_a_decision_and_refuses_other_routes_bad_bodies_and_chunked_uploads(stub: str) -> None:
    with httpx.Client(base_url=stub, timeout=10) as client:
        answer = client.post("/decisions", json={"model": "m", "state": "s", "questions": QUESTIONS})
        assert answer.status_code == 200 and set(answer.json()["answers"]) == set(QUESTIONS)
        assert client.get("/models").status_code == 404
        bad = client.post("/decisions", content=b"{not json")
        assert bad.status_code == 400 and "bad request" in bad.json()["error"]["message"]
        chunked = client.post("/decisions", content=iter([b'{"model": "m"}']))
        assert chunked.status_code == 411
