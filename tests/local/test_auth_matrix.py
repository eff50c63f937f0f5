"""Every endpoint × every way a credential can be wrong: 401 first, in the family's body, never the key.

The table below is the list of endpoints: a family the gateway stops serving fails here, never skips."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.gateways import RunningGateway
from tests.support.models import IMAGE_MODEL

DECIDE, TEXT, VIDEO, REALTIME = ("local/decide-e5-small", "local/gemma-3-270m", "local/video-preview",
                                 "local/realtime-gemma-3-270m")
ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}
IMAGE = IMAGE_MODEL
SYSTEM_ONE = {"model": DECIDE, "state": "x", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}
SDP_OFFER = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    body: Any = None
    model: str | None = None  # the model the body asks for, for the 403 case
    headers: dict[str, str] = field(default_factory=dict)
    family: str = "openai"  # the error body shape: openai | anthropic | typesafe

    def request(self, gateway: RunningGateway, headers: dict[str, str]) -> httpx.Response:
        all_headers = {**self.headers, **headers}
        kwargs: dict[str, Any] = {"headers": all_headers, "timeout": 30}
        if isinstance(self.body, str):
            kwargs["content"] = self.body
        elif self.body is not None:
            kwargs["json"] = self.body
        return httpx.request(self.method, f"{gateway.base_url}{self.path}", **kwargs)


ENDPOINTS = [
    Endpoint("models", "GET", "/models"),
    Endpoint("model", "GET", f"/models/{DECIDE}"),
    Endpoint("chat", "POST", "/chat/completions",
             {"model": TEXT, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, TEXT),
    Endpoint("responses", "POST", "/responses", {"model": TEXT, "input": "hi",
                                                              "max_output_tokens": 1}, TEXT),
    Endpoint("response", "GET", "/responses/resp_missing"),
    Endpoint("messages", "POST", "/messages",
             {"model": TEXT, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}, TEXT,
             ANTHROPIC_VERSION, "anthropic"),
    Endpoint("decisions", "POST", "/decisions", SYSTEM_ONE, DECIDE),
    Endpoint("systemone", "POST", "/systemone", SYSTEM_ONE, DECIDE, family="typesafe"),
    Endpoint("embeddings", "POST", "/embeddings", {"model": DECIDE, "input": "hi"}, DECIDE),
    Endpoint("videos.create", "POST", "/videos", {"prompt": "x", "model": VIDEO}, VIDEO),
    Endpoint("videos.list", "GET", "/videos"),
    Endpoint("videos.retrieve", "GET", "/videos/video_missing"),
    Endpoint("videos.content", "GET", "/videos/video_missing/content"),
    Endpoint("videos.delete", "DELETE", "/videos/video_missing"),
    Endpoint("videos.remix", "POST", "/videos/video_missing/remix", {"prompt": "x"}),
    Endpoint("images.create", "POST", "/images/tasks", {"prompt": "x", "model": IMAGE}, IMAGE),
    Endpoint("images.list", "GET", "/images/tasks"),
    Endpoint("images.retrieve", "GET", "/images/tasks/imgtask_missing"),
    Endpoint("images.content", "GET", "/images/tasks/imgtask_missing/content"),
    Endpoint("images.cancel", "POST", "/images/tasks/imgtask_missing/cancel"),
    Endpoint("images.delete", "DELETE", "/images/tasks/imgtask_missing"),
    Endpoint("realtime.sessions", "POST", "/realtime/sessions", {"model": REALTIME}, REALTIME),
    Endpoint("realtime.webrtc", "POST", f"/realtime?model={REALTIME}", SDP_OFFER,
             headers={"content-type": "application/sdp"}),
]
WITH_MODEL = [e for e in ENDPOINTS if e.model]
BEARER_ONLY = [e for e in ENDPOINTS if e.family != "anthropic"]
ids = [e.name for e in ENDPOINTS]


@dataclass
class Keys:
    valid: str
    disabled: str
    deleted: str
    only_decide: str = field(repr=False)
    only_video: str = field(repr=False)

    def all(self) -> list[str]:
        return [self.valid, self.disabled, self.deleted, self.only_decide, self.only_video]


@pytest.fixture(scope="module")
def keys(gateway: RunningGateway) -> Iterator[Keys]:
    made = Keys(gateway.create_key("auth-valid"), gateway.create_key("auth-disabled"),
                gateway.create_key("auth-deleted"), gateway.create_key("auth-only-decide", DECIDE),
                gateway.create_key("auth-only-video", VIDEO))
    gateway.cli("keys", "disable", "auth-disabled")
    gateway.cli("keys", "delete", "auth-deleted")
    yield made


def _assert_401(r: httpx.Response, endpoint: Endpoint, secrets: list[str]) -> None:
    assert r.status_code == 401, f"{endpoint.name}: {r.status_code} {r.text[:300]}"
    assert r.headers["x-request-id"].startswith("req_")
    body = r.json()
    if endpoint.family == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
        assert isinstance(body["error"]["message"], str)
    elif endpoint.family == "typesafe":
        assert body["detail"]["error_type"] == "authentication_error" and body["detail"]["message"]
        assert r.headers["x-typesafe-request-id"] == r.headers["x-request-id"]
    else:
        assert set(body["error"]) >= {"message", "type", "param", "code"}
        assert body["error"]["code"] == "invalid_api_key"
    _assert_no_secret(r, secrets)


def _assert_no_secret(r: httpx.Response, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in r.text and secret not in str(r.headers)


def _auth(endpoint: Endpoint, secret: str) -> dict[str, str]:
    return {"x-api-key": secret} if endpoint.family == "anthropic" else {"Authorization": f"Bearer {secret}"}


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_no_key_is_401(gateway: RunningGateway, endpoint: Endpoint) -> None:
    _assert_401(endpoint.request(gateway, {}), endpoint, [])


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_unknown_key_is_401(gateway: RunningGateway, endpoint: Endpoint) -> None:
    secret = "gwl_this-key-was-never-issued-0123456789"
    _assert_401(endpoint.request(gateway, _auth(endpoint, secret)), endpoint, [secret])


# ("Bearer " with a trailing space cannot be sent: HTTP clients refuse the header before it leaves)
@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "bearer", "Bearer one two", "Token abc",
                                    "gwl_a-key-without-a-scheme"])
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_malformed_authorization_header_is_401(gateway: RunningGateway, endpoint: Endpoint,
                                                header: str) -> None:
    _assert_401(endpoint.request(gateway, {"Authorization": header}), endpoint, [])


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_disabled_key_is_401(gateway: RunningGateway, keys: Keys, endpoint: Endpoint) -> None:
    r = endpoint.request(gateway, _auth(endpoint, keys.disabled))
    _assert_401(r, endpoint, keys.all())


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_deleted_key_is_401(gateway: RunningGateway, keys: Keys, endpoint: Endpoint) -> None:
    r = endpoint.request(gateway, _auth(endpoint, keys.deleted))
    _assert_401(r, endpoint, keys.all())


@pytest.mark.parametrize("endpoint", BEARER_ONLY, ids=[e.name for e in BEARER_ONLY])
def test_x_api_key_is_not_a_credential_outside_messages(gateway: RunningGateway, keys: Keys,
                                                        endpoint: Endpoint) -> None:
    r = endpoint.request(gateway, {"x-api-key": keys.valid})
    _assert_401(r, endpoint, keys.all())


def test_messages_accepts_bearer_and_x_api_key(gateway: RunningGateway, keys: Keys) -> None:
    endpoint = next(e for e in ENDPOINTS if e.name == "messages")
    bad_body = {"model": TEXT}  # no messages: refused after authentication, before any generation
    for headers in ({"Authorization": f"Bearer {keys.valid}"}, {"x-api-key": keys.valid}):
        r = httpx.post(f"{gateway.base_url}/messages", json=bad_body, headers={**endpoint.headers, **headers},
                       timeout=30)
        assert r.status_code == 400, r.text
        _assert_no_secret(r, keys.all())


def test_x_api_key_wins_over_a_malformed_authorization_on_messages(gateway: RunningGateway,
                                                                   keys: Keys) -> None:
    endpoint = next(e for e in ENDPOINTS if e.name == "messages")
    r = httpx.post(f"{gateway.base_url}/messages", json={"model": TEXT}, timeout=30,
                   headers={**endpoint.headers, "x-api-key": keys.valid, "Authorization": "Basic x"})
    assert r.status_code == 400


@pytest.mark.parametrize("endpoint", WITH_MODEL, ids=[e.name for e in WITH_MODEL])
def test_a_key_restricted_to_another_model_is_403(gateway: RunningGateway, keys: Keys,
                                                   endpoint: Endpoint) -> None:
    secret = keys.only_video if endpoint.model != VIDEO else keys.only_decide
    r = endpoint.request(gateway, _auth(endpoint, secret))
    assert r.status_code == 403, f"{endpoint.name}: {r.status_code} {r.text[:300]}"
    body = r.json()
    message = (body["error"]["message"] if endpoint.family != "typesafe" else body["detail"]["message"])
    assert endpoint.model in message
    _assert_no_secret(r, keys.all())


def test_a_restricted_key_lists_only_its_models_and_cannot_see_others(gateway: RunningGateway,
                                                                      keys: Keys) -> None:
    headers = {"Authorization": f"Bearer {keys.only_decide}"}
    listed = httpx.get(f"{gateway.base_url}/models", headers=headers, timeout=30).json()
    assert [m["id"] for m in listed["data"]] == [DECIDE]
    hidden = httpx.get(f"{gateway.base_url}/models/{TEXT}", headers=headers, timeout=30)
    assert hidden.status_code == 404


def test_a_restricted_key_may_use_its_own_model(gateway: RunningGateway, keys: Keys) -> None:
    r = httpx.post(f"{gateway.base_url}/decisions", json=SYSTEM_ONE, timeout=30,
                   headers={"Authorization": f"Bearer {keys.only_decide}"})
    assert r.status_code == 200
    _assert_no_secret(r, keys.all())


def test_an_unknown_model_is_404_even_for_a_restricted_key(gateway: RunningGateway, keys: Keys) -> None:
    r = httpx.post(f"{gateway.base_url}/decisions", json={**SYSTEM_ONE, "model": "no-such-model"}, timeout=30,
                   headers={"Authorization": f"Bearer {keys.only_decide}"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_a_key_disabled_while_the_gateway_runs_stops_working_at_once(gateway: RunningGateway) -> None:
    secret = gateway.create_key("auth-disabled-live")
    headers = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(f"{gateway.base_url}/models", headers=headers, timeout=30).status_code == 200
    gateway.cli("keys", "disable", "auth-disabled-live")
    r = httpx.get(f"{gateway.base_url}/models", headers=headers, timeout=30)
    assert r.status_code == 401 and "disabled" in r.json()["error"]["message"]
