from __future__ import annotations

import httpx


def test_models_lists_every_model_for_an_unrestricted_key(gateway) -> None:
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 200
    ids = [m["id"] for m in r.json()["data"]]
    assert "local/gemma-3-270m" in ids and "local/decide-e5-small" in ids
    assert r.headers["x-request-id"].startswith("req_")
