"""Every request lands in the request log (id, status, model, tokens), and no key or input ever does."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest
import websockets
from websockets.sync.client import connect

from tests.support import wait_until
from tests.support.gateways import RunningGateway

SECRET_STATE = "the-customer-said-zebra-umbrella-47"  # a marker: the log must never hold a request's input


def _row(gateway: RunningGateway, request_id: str) -> dict[str, Any]:
    """The log row of one request. The gateway writes it just after the last byte is sent, so wait for it
    (bounded, never a hang)."""
    def row() -> dict[str, Any] | None:
        with sqlite3.connect(f"file:{gateway.db}?mode=ro", uri=True) as conn:
            conn.row_factory = sqlite3.Row
            found = conn.execute("SELECT * FROM request_log WHERE request_id = ?", (request_id,)).fetchone()
        return dict(found) if found is not None else None

    return wait_until(row, timeout=60, interval=0.05, what=f"request {request_id} in the request log")


def _auth(gateway: RunningGateway) -> dict[str, str]:
    return {"Authorization": f"Bearer {gateway.api_key}"}


def _logged(gateway: RunningGateway, r: httpx.Response) -> dict[str, Any]:
    row = _row(gateway, r.headers["x-request-id"])
    assert row["status"] == r.status_code and row["method"] == r.request.method
    assert row["path"] == r.request.url.path and row["latency_ms"] >= 0 and row["ts"] > 0
    return row


def test_a_decision_is_logged_with_its_model_and_real_usage(gateway: RunningGateway) -> None:
    body = {"model": "local/decide-e5-small", "state": SECRET_STATE,
            "questions": {"q": {"type": "noul", "instructions": "Is it about animals?"}}}
    r = httpx.post(f"{gateway.base_url}/decisions", json=body, headers=_auth(gateway), timeout=30)
    row = _logged(gateway, r)
    assert row["model"] == "local/decide-e5-small" and row["key_id"] is not None
    assert (row["input_tokens"], row["output_tokens"]) == (r.json()["usage"]["input_tokens"], 0)
    assert row["streamed"] == 0


def test_systemone_is_logged_under_the_id_typesafe_clients_see(gateway: RunningGateway) -> None:
    body = {"model": "local/decide-e5-small", "state": "x",
            "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}
    r = httpx.post(f"{gateway.base_url}/systemone", json=body, headers=_auth(gateway), timeout=30)
    assert r.headers["x-typesafe-request-id"] == r.headers["x-request-id"]
    assert _logged(gateway, r)["input_tokens"] == r.json()["usage"]["input_tokens"]


def test_embeddings_are_logged_with_their_model_and_input_tokens_without_the_text(gateway: RunningGateway) -> None:
    body = {"model": "local/decide-e5-small", "input": [SECRET_STATE, "another text"]}
    r = httpx.post(f"{gateway.base_url}/embeddings", json=body, headers=_auth(gateway), timeout=30)
    row = _logged(gateway, r)
    assert row["model"] == "local/decide-e5-small" and row["key_id"] is not None
    assert (row["input_tokens"], row["output_tokens"]) == (r.json()["usage"]["prompt_tokens"], 0)
    assert SECRET_STATE not in str(row)


def test_a_chat_completion_is_logged_with_prompt_and_completion_tokens(gateway: RunningGateway) -> None:
    body = {"model": "local/gemma-3-270m", "messages": [{"role": "user", "content": "Q: 2+2?\nA:"}],
            "max_tokens": 3}
    r = httpx.post(f"{gateway.base_url}/chat/completions", json=body, headers=_auth(gateway), timeout=120)
    assert r.status_code == 200, r.text
    usage, row = r.json()["usage"], _logged(gateway, r)
    assert row["model"] == "local/gemma-3-270m"
    assert (row["input_tokens"], row["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_a_streamed_chat_is_logged_once_it_ends_with_its_usage(gateway: RunningGateway) -> None:
    body = {"model": "local/gemma-3-270m", "messages": [{"role": "user", "content": "Q: Hi?\nA:"}],
            "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{gateway.base_url}/chat/completions", json=body, headers=_auth(gateway),
                      timeout=120) as r:
        text = r.read().decode()
    assert r.status_code == 200 and "[DONE]" in text
    row = _logged(gateway, r)
    assert row["streamed"] == 1 and row["model"] == "local/gemma-3-270m"
    assert row["input_tokens"] > 0 and row["output_tokens"] >= 1


def test_a_video_submission_is_logged_with_its_model(gateway: RunningGateway) -> None:
    r = httpx.post(f"{gateway.base_url}/videos", json={"prompt": "logged"}, headers=_auth(gateway),
                   timeout=30)
    row = _logged(gateway, r)
    assert row["model"] == "local/video-preview" and row["input_tokens"] is None


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), [
    ("GET", "/models", {}, 401),  # no key: logged, without a key id
    ("POST", "/decisions", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400),
    ("GET", "/no/such/path", {}, 404),
    ("POST", "/decisions", {"json": {"model": "missing-model", "state": "x", "questions": {
        "q": {"type": "noul", "instructions": "?"}}}}, 404),
])
def test_refused_requests_are_logged_too(gateway: RunningGateway, method: str, path: str, kwargs: dict,
                                         status: int) -> None:
    kwargs = dict(kwargs)  # the parametrize value is shared: popping from it would strip a rerun's headers
    headers = {**({} if status == 401 else _auth(gateway)), **kwargs.pop("headers", {})}
    r = httpx.request(method, f"{gateway.base_url}{path}", headers=headers, timeout=30, **kwargs)
    assert r.status_code == status
    row = _logged(gateway, r)
    assert row["input_tokens"] is None and row["output_tokens"] is None
    if status == 401:
        assert row["key_id"] is None


def test_a_refused_realtime_handshake_is_logged_with_the_status_the_client_saw(gateway: RunningGateway) -> None:
    url = f"{gateway.base_url.replace('http', 'ws', 1)}/realtime?model=local/realtime-gemma-3-270m"
    with pytest.raises(websockets.InvalidStatus) as refused:
        connect(url, additional_headers={"Authorization": "Bearer not-a-key", "OpenAI-Beta": "realtime=v1"}).close()
    response = refused.value.response
    row = _row(gateway, response.headers["x-request-id"])
    assert response.status_code == row["status"] == 401
    assert row["method"] == "WS" and row["key_id"] is None


def test_every_request_gets_its_own_id(gateway: RunningGateway) -> None:
    ids = {httpx.get(f"{gateway.base_url}/models", headers=_auth(gateway), timeout=30).headers["x-request-id"]
           for _ in range(5)}
    assert len(ids) == 5
    for request_id in ids:
        assert _row(gateway, request_id)["status"] == 200


def test_the_log_and_the_database_never_hold_a_key_or_a_decision_input(gateway: RunningGateway) -> None:
    test_a_decision_is_logged_with_its_model_and_real_usage(gateway)  # make sure there is something to leak
    extra = gateway.create_key("log-probe")
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {extra}"}, timeout=30)
    _logged(gateway, r)
    with sqlite3.connect(f"file:{gateway.db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT * FROM request_log").fetchall()
    dump = "\n".join(" ".join(map(str, row)) for row in rows)
    for secret in (gateway.api_key, extra):
        assert secret not in dump and secret[10:] not in dump
    assert SECRET_STATE not in dump
    for path in gateway.db.parent.iterdir():
        if path.name.startswith(gateway.db.name):
            data = path.read_bytes()
            for secret in (gateway.api_key, extra):
                assert secret.encode() not in data, path.name
            assert SECRET_STATE.encode() not in data, path.name
