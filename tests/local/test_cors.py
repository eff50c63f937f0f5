"""Browsers may reach the WebRTC SDP exchange cross-origin, and nothing else."""

from __future__ import annotations

import httpx

ORIGIN = "http://127.0.0.1:8888"


def _preflight(gateway, path: str) -> httpx.Response:
    return httpx.options(f"{gateway.api_host}{path}", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})


def test_sdp_exchange_preflight_allows_a_page_on_another_origin(gateway) -> None:
    r = _preflight(gateway, "/v1/realtime?model=local/realtime-gemma-3-270m")
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    assert "POST" in r.headers["access-control-allow-methods"]
    allowed = {h.strip() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed


def test_sdp_exchange_answer_is_readable_cross_origin_even_when_refused(gateway) -> None:
    # a long-lived key is refused there (ephemeral tokens only), and the page can read why
    r = httpx.post(f"{gateway.base_url}/realtime?model=local/realtime-gemma-3-270m", content=b"v=0\r\n",
                   headers={"Origin": ORIGIN, "Content-Type": "application/sdp",
                            "Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 401
    assert r.headers["access-control-allow-origin"] == "*"
    assert "x-request-id" in r.headers["access-control-expose-headers"]


def test_key_spending_endpoints_give_browsers_no_cross_origin_access(gateway) -> None:
    for path in ("/v1/chat/completions", "/v1/realtime/sessions", "/v1/decisions", "/v1/models"):
        assert "access-control-allow-origin" not in _preflight(gateway, path).headers
        r = httpx.get(f"{gateway.base_url}/models", headers={"Origin": ORIGIN,
                                                             "Authorization": f"Bearer {gateway.api_key}"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
