"""What tests/local/test_auth_matrix.py and test_realtime_websocket.py leave out of the auth matrix.

Already proven there: no, unknown, malformed, disabled and deleted keys (every endpoint); x-api-key
outside messages; a restricted key refused with 403 on every endpoint that names a model (and on the
realtime handshake); an ephemeral token used twice or expired on the WebSocket, used twice on WebRTC;
long-lived keys on WebRTC. Added here: every other family's credential on every family (the realtime
subprotocol key and ephemeral tokens on HTTP, x-api-key on the realtime handshake, keys in the query
string), the ephemeral token across channels and after its key is disabled or deleted, the restricted
key on the remaining shapes (OpenAI-shape decisions, multipart videos, streams, the subprotocol
handshake), and one key's stored responses and videos invisible to another key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gwlab.local.store import hash_secret
from tests.support.gateways import RunningGateway, make_key, set_key
from tests.support.models import DECIDE_MODEL as DECIDE
from tests.support.models import REALTIME_MODEL as REALTIME
from tests.support.models import TEXT_MODEL as TEXT
from tests.support.models import VIDEO_MODEL as VIDEO

ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}
SYSTEM_ONE = {"model": DECIDE, "state": "x", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}
OPENAI_DECISION = {"model": DECIDE, "input": "x", "questions": [{"type": "predicate", "instructions": "Is it?"}]}
SDP_OFFER = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
SDP = {"content-type": "application/sdp"}
# (name, method, path, body, extra headers): every HTTP endpoint, with a body that passes validation
HTTP = [
    ("models", "GET", "/models", None, {}),
    ("model", "GET", f"/models/{DECIDE}", None, {}),
    ("chat", "POST", "/chat/completions", {"model": TEXT, "messages": [{"role": "user", "content": "hi"}],
                                           "max_tokens": 1}, {}),
    ("responses", "POST", "/responses", {"model": TEXT, "input": "hi", "max_output_tokens": 1}, {}),
    ("response", "GET", "/responses/resp_missing", None, {}),
    ("messages", "POST", "/messages", {"model": TEXT, "max_tokens": 1,
                                       "messages": [{"role": "user", "content": "hi"}]}, ANTHROPIC_VERSION),
    ("decisions", "POST", "/decisions", SYSTEM_ONE, {}),
    ("systemone", "POST", "/systemone", SYSTEM_ONE, {}),
    ("videos.create", "POST", "/videos", {"prompt": "x", "model": VIDEO}, {}),
    ("videos.list", "GET", "/videos", None, {}),
    ("videos.retrieve", "GET", "/videos/video_missing", None, {}),
    ("videos.content", "GET", "/videos/video_missing/content", None, {}),
    ("videos.delete", "DELETE", "/videos/video_missing", None, {}),
    ("videos.remix", "POST", "/videos/video_missing/remix", {"prompt": "x"}, {}),
    ("realtime.sessions", "POST", "/realtime/sessions", {"model": REALTIME}, {}),
]
HTTP_IDS = [e[0] for e in HTTP]


def _request(gateway: RunningGateway, endpoint: tuple[Any, ...], headers: dict[str, str],
             params: dict[str, str] | None = None) -> httpx.Response:
    _, method, path, body, extra = endpoint
    return httpx.request(method, f"{gateway.base_url}{path}", json=body, params=params,
                         headers={**extra, **headers}, timeout=60)


def _ws_url(gateway: RunningGateway, model: str = REALTIME) -> str:
    return f"{gateway.base_url.replace('http', 'ws', 1)}/realtime?model={model}"


def handshake(gateway: RunningGateway, headers: dict[str, str] | None = None,
              subprotocols: list[str] | None = None, model: str = REALTIME) -> int:
    """The status of a realtime handshake: 101 when it opened (then closed at once), else the refusal."""
    try:
        with connect(_ws_url(gateway, model), additional_headers=headers or {}, open_timeout=60,
                     subprotocols=subprotocols) as ws:  # type: ignore[arg-type]
            ws.recv(timeout=60)  # session.created: the session really started
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def _token(gateway: RunningGateway, key: str | None = None) -> str:
    r = httpx.post(f"{gateway.base_url}/realtime/sessions", json={"model": REALTIME}, timeout=60,
                   headers={"Authorization": f"Bearer {key or gateway.api_key}"})
    assert r.status_code == 200, r.text
    return r.json()["client_secret"]["value"]


def _assert_401(r: httpx.Response, *secrets: str) -> None:
    assert r.status_code == 401, f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text[:200]}"
    for secret in secrets:
        assert secret not in r.text and secret not in str(r.headers)


# --- another family's credential -------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", HTTP, ids=HTTP_IDS)
def test_the_realtime_subprotocol_key_is_not_an_http_credential(gateway: RunningGateway,
                                                                endpoint: tuple[Any, ...]) -> None:
    protocols = f"realtime, openai-insecure-api-key.{gateway.api_key}, openai-beta.realtime-v1"
    _assert_401(_request(gateway, endpoint, {"Sec-WebSocket-Protocol": protocols}), gateway.api_key)


@pytest.mark.parametrize("endpoint", HTTP, ids=HTTP_IDS)
def test_an_ephemeral_token_is_not_a_key_on_http_endpoints(gateway: RunningGateway,
                                                           endpoint: tuple[Any, ...]) -> None:
    token = _token(gateway)
    header = {"x-api-key": token} if endpoint[0] == "messages" else {"Authorization": f"Bearer {token}"}
    _assert_401(_request(gateway, endpoint, header), token)
    assert handshake(gateway, {"Authorization": f"Bearer {token}", "OpenAI-Beta": "realtime=v1"}) == 101


@pytest.mark.parametrize("endpoint", HTTP, ids=HTTP_IDS)
@pytest.mark.parametrize("name", ["api_key", "key", "access_token"])
def test_a_key_in_the_query_string_is_not_a_credential(gateway: RunningGateway, endpoint: tuple[Any, ...],
                                                       name: str) -> None:
    _assert_401(_request(gateway, endpoint, {}, params={name: gateway.api_key}))


def test_the_messages_header_is_not_a_realtime_credential(gateway: RunningGateway) -> None:
    headers = {"x-api-key": gateway.api_key, "OpenAI-Beta": "realtime=v1", **ANTHROPIC_VERSION}
    assert handshake(gateway, headers) == 401


def test_a_key_in_the_realtime_query_string_is_not_a_credential(gateway: RunningGateway) -> None:
    url_model = f"{REALTIME}&api_key={gateway.api_key}"
    assert handshake(gateway, {"OpenAI-Beta": "realtime=v1"}, model=url_model) == 401


# --- ephemeral tokens ------------------------------------------------------------------------------------
def test_a_token_spent_on_the_websocket_is_refused_by_webrtc(gateway: RunningGateway) -> None:
    token = _token(gateway)
    assert handshake(gateway, {"Authorization": f"Bearer {token}", "OpenAI-Beta": "realtime=v1"}) == 101
    r = httpx.post(f"{gateway.base_url}/realtime?model={REALTIME}", content=SDP_OFFER, timeout=60,
                   headers={**SDP, "Authorization": f"Bearer {token}"})
    _assert_401(r, token)


def test_an_expired_token_is_refused_by_webrtc(gateway: RunningGateway) -> None:
    token = _token(gateway)
    with sqlite3.connect(gateway.db) as db:  # expired in the gateway's own database: no clock to fake
        db.execute("UPDATE ephemeral_tokens SET expires_at = 0 WHERE hash = ?", (hash_secret(token),))
    r = httpx.post(f"{gateway.base_url}/realtime?model={REALTIME}", content=SDP_OFFER, timeout=60,
                   headers={**SDP, "Authorization": f"Bearer {token}"})
    _assert_401(r, token)
    assert "expired" in r.json()["error"]["message"]


@pytest.mark.parametrize("action", ["disable", "delete"])
def test_a_token_dies_with_the_key_that_made_it(gateway: RunningGateway, action: str) -> None:
    key = make_key(gateway.db, f"gaps-token-owner-{action}")
    tokens = [_token(gateway, key), _token(gateway, key)]
    set_key(gateway.db, key, action)
    assert handshake(gateway, {"Authorization": f"Bearer {tokens[0]}", "OpenAI-Beta": "realtime=v1"}) == 401
    r = httpx.post(f"{gateway.base_url}/realtime?model={REALTIME}", content=SDP_OFFER, timeout=60,
                   headers={**SDP, "Authorization": f"Bearer {tokens[1]}"})
    _assert_401(r, tokens[1], key)


# --- a key restricted to other models ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def only_video(gateway: RunningGateway) -> str:
    return make_key(gateway.db, "gaps-only-video", VIDEO)


RESTRICTED = [
    ("decisions.openai-shape", "POST", "/decisions", OPENAI_DECISION, {}),
    ("chat.stream", "POST", "/chat/completions", {"model": TEXT, "messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 1, "stream": True}, {}),
    ("responses.stream", "POST", "/responses", {"model": TEXT, "input": "hi", "max_output_tokens": 1,
                                                "stream": True}, {}),
    ("messages.stream", "POST", "/messages", {"model": TEXT, "max_tokens": 1, "stream": True,
                                              "messages": [{"role": "user", "content": "hi"}]}, ANTHROPIC_VERSION),
]


@pytest.mark.parametrize("endpoint", RESTRICTED, ids=[e[0] for e in RESTRICTED])
def test_a_restricted_key_is_403_on_every_remaining_shape(gateway: RunningGateway, only_video: str,
                                                          endpoint: tuple[Any, ...]) -> None:
    r = _request(gateway, endpoint, {"Authorization": f"Bearer {only_video}"})
    assert r.status_code == 403 and r.headers["content-type"].startswith("application/json"), r.text[:200]
    assert only_video not in r.text


def test_a_restricted_key_is_403_on_a_multipart_video_of_another_model(gateway: RunningGateway) -> None:
    key = make_key(gateway.db, "gaps-only-decide", DECIDE)
    r = httpx.post(f"{gateway.base_url}/videos", files={"prompt": (None, "x"), "model": (None, VIDEO)},
                   timeout=60, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 403, r.text


def test_a_restricted_key_is_refused_on_the_subprotocol_handshake(gateway: RunningGateway,
                                                                  only_video: str) -> None:
    protocols = ["realtime", f"openai-insecure-api-key.{only_video}", "openai-beta.realtime-v1"]
    assert handshake(gateway, subprotocols=protocols) == 403


# --- one key's resources are invisible to another ----------------------------------------------------------
@pytest.fixture(scope="module")
def two_keys(gateway: RunningGateway) -> Iterator[tuple[str, str]]:
    yield make_key(gateway.db, "gaps-owner"), make_key(gateway.db, "gaps-stranger")


def test_a_stored_response_is_invisible_to_another_key(gateway: RunningGateway, two_keys: tuple[str, str]) -> None:
    owner, stranger = ({"Authorization": f"Bearer {k}"} for k in two_keys)
    r = httpx.post(f"{gateway.base_url}/responses", json={"model": TEXT, "input": "hi", "max_output_tokens": 1},
                   headers=owner, timeout=120)
    assert r.status_code == 200, r.text
    response_id = r.json()["id"]
    assert httpx.get(f"{gateway.base_url}/responses/{response_id}", headers=owner, timeout=60).status_code == 200
    assert httpx.get(f"{gateway.base_url}/responses/{response_id}", headers=stranger,
                     timeout=60).status_code == 404
    follow = {"model": TEXT, "input": "and?", "max_output_tokens": 1, "previous_response_id": response_id}
    r = httpx.post(f"{gateway.base_url}/responses", json=follow, headers=stranger, timeout=60)
    assert r.status_code == 404 and r.json()["error"]["code"] == "previous_response_not_found"


def test_a_video_is_invisible_to_another_key(gateway: RunningGateway, two_keys: tuple[str, str]) -> None:
    owner, stranger = ({"Authorization": f"Bearer {k}"} for k in two_keys)
    base = gateway.base_url
    video = httpx.post(f"{base}/videos", json={"prompt": "gaps", "model": VIDEO}, headers=owner, timeout=60).json()
    for method, path, body in [("GET", f"/videos/{video['id']}", None),
                               ("GET", f"/videos/{video['id']}/content", None),
                               ("POST", f"/videos/{video['id']}/remix", {"prompt": "again"}),
                               ("DELETE", f"/videos/{video['id']}", None)]:
        r = httpx.request(method, base + path, json=body, headers=stranger, timeout=60)
        assert r.status_code == 404, f"{method} {path}: {r.status_code}"
    listed = httpx.get(f"{base}/videos", headers=stranger, timeout=60).json()["data"]
    assert video["id"] not in [v["id"] for v in listed]
    assert httpx.get(f"{base}/videos/{video['id']}", headers=owner, timeout=60).status_code == 200
