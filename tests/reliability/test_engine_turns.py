"""The shared text engine against one greedy key (issue 30, finding 3): a client that leaves stops its
generation, streamed or not, and frees the engine; another key's short request is answered while a long
one runs, and the long one, handed over mid-answer, still ends valid against its grammar.

The gateway runs in this process (`gwlab.local.start`, as notebooks start it) so the engine's turns
(`gwlab.local.engines.turns.TURNS`) can be watched directly: who holds the engine, whether it is idle.
The long request is a JSON answer whose schema forces hundreds of array items, so it cannot end early;
every wait is bounded, and the only clock is the bound of each wait."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from gwlab.local.engines.turns import TURNS
from gwlab.local.server import LocalGateway, start
from gwlab.local.store import Store
from tests.support import wait_until
from tests.support.gateways import key_id
from tests.support.models import TEXT_MODEL, TEXT_MODELS

FREED_S = 10.0  # bound for the engine to be free after the client left (the claim: within a second)
ANSWER_S = 60.0  # bound for a short request's answer on a busy shared machine


def _numbers(items: int, model: str = TEXT_MODEL) -> dict[str, Any]:
    """A chat body whose answer must list at least `items` integers (the grammar cannot end sooner)."""
    schema = {"type": "object", "properties": {"numbers": {"type": "array", "items": {"type": "integer"},
                                                           "minItems": items}}, "required": ["numbers"]}
    return {"model": model, "max_tokens": 4000, "temperature": 0.7,
            "messages": [{"role": "user", "content": "List many numbers."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "numbers", "schema": schema}}}


RESUME_MODEL = TEXT_MODELS[-1]  # SmolLM2, the default text model
LONG = _numbers(1500)  # thousands of tokens: minutes on this machine


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    running = start(str(Path(tmp_path_factory.mktemp("turns")) / "gateway.sqlite"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def other_key(gateway: LocalGateway) -> str:
    store = Store(gateway.db_path)
    try:
        return store.create_key("other")
    finally:
        store.close()


def _send_raw(gateway: LocalGateway, key: str, body: dict[str, Any]) -> socket.socket:
    """A request on a raw socket, left unread, so the test can hang up whenever it likes."""
    url = urlsplit(gateway.base_url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def _chat(gateway: LocalGateway, key: str, body: dict[str, Any], timeout: float = ANSWER_S) -> httpx.Response:
    return httpx.post(f"{gateway.base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                      timeout=httpx.Timeout(timeout))


def _wait_idle() -> None:
    wait_until(TURNS.idle, timeout=ANSWER_S, what="an idle engine before the test")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_client_that_hangs_up_frees_the_engine(gateway: LocalGateway, stream: bool) -> None:
    _wait_idle()
    me = key_id(Path(gateway.db_path), gateway.api_key)
    with closing(_send_raw(gateway, gateway.api_key, {**LONG, "stream": stream})):
        wait_until(lambda: TURNS.holder() == me, timeout=ANSWER_S, what="the long request generating")
    # hung up mid-answer: the generation stops between two tokens and hands the engine back
    wait_until(TURNS.idle, timeout=FREED_S, what="the engine freed after the client left")
    short = _chat(gateway, gateway.api_key, {"model": TEXT_MODEL, "max_tokens": 3,
                                             "messages": [{"role": "user", "content": "Hi"}]})
    assert short.status_code == 200, short.text[:300]


def test_another_keys_short_request_is_answered_while_a_long_one_runs(gateway: LocalGateway, other_key: str) -> None:
    _wait_idle()
    me = key_id(Path(gateway.db_path), gateway.api_key)
    with closing(_send_raw(gateway, gateway.api_key, LONG)) as long_request:
        wait_until(lambda: TURNS.holder() == me, timeout=ANSWER_S, what="the long request generating")
        short = _chat(gateway, other_key, {"model": TEXT_MODEL, "max_tokens": 5,
                                           "messages": [{"role": "user", "content": "Say hi."}]})
        assert short.status_code == 200, short.text[:300]
        assert short.json()["choices"][0]["message"]["content"]
        # answered while the long one was still at work: it holds or waits for the engine again
        long_request.settimeout(0.0)
        with pytest.raises(BlockingIOError):
            long_request.recv(1)  # nothing answered yet
        assert TURNS.holder() == me or not TURNS.idle()
    wait_until(TURNS.idle, timeout=FREED_S, what="the engine freed after the client left")


def test_an_answer_handed_over_mid_way_resumes_valid_against_its_grammar(gateway: LocalGateway,
                                                                       other_key: str) -> None:
    _wait_idle()
    me = key_id(Path(gateway.db_path), gateway.api_key)
    # SmolLM2 (a 49k-token vocabulary: grammar-bound sampling is far quicker than over Gemma's 262k), on
    # both sides, so the long answer's sequence is really evicted from the model's context and restored
    items, model = 24, RESUME_MODEL
    result: dict[str, httpx.Response] = {}
    body = _numbers(items, model)
    worker = threading.Thread(target=lambda: result.update(long=_chat(gateway, gateway.api_key, body, 600)))
    worker.start()
    try:
        wait_until(lambda: TURNS.holder() == me, timeout=ANSWER_S, what="the long request generating")
        shorts = [_chat(gateway, other_key, {"model": model, "max_tokens": 4,
                                             "messages": [{"role": "user", "content": f"Count to {n}."}]})
                  for n in range(2)]
        handed_over = worker.is_alive()  # the short ones were answered before the long one ended
    finally:
        worker.join(timeout=600)
    assert all(r.status_code == 200 for r in shorts), [r.text[:200] for r in shorts]
    assert handed_over
    answer = result["long"]
    assert answer.status_code == 200, answer.text[:300]
    numbers = json.loads(answer.json()["choices"][0]["message"]["content"])["numbers"]
    assert len(numbers) >= items and all(isinstance(n, int) for n in numbers)
