"""The local gateway takes a chat cap under both names (gwlab's client sends both: client.dialect)."""

from __future__ import annotations

import httpx

from tests.support.models import TEXT_MODEL

MODEL = TEXT_MODEL
LIST = [{"role": "user", "content": "List twenty animals, one per line."}]


def _post(gateway, **body) -> httpx.Response:
    return httpx.post(f"{gateway.base_url}/chat/completions", json={"model": MODEL, "messages": LIST, **body},
                      headers={"Authorization": f"Bearer {gateway.api_key}"}, timeout=120)


def test_both_cap_fields_with_one_value_cap_the_answer(gateway) -> None:
    answer = _post(gateway, max_completion_tokens=3, max_tokens=3, temperature=0)
    assert answer.status_code == 200
    assert answer.json()["usage"]["completion_tokens"] == 3
    assert answer.json()["choices"][0]["finish_reason"] == "length"


def test_two_different_cap_values_are_a_400_naming_max_tokens(gateway) -> None:
    answer = _post(gateway, max_completion_tokens=3, max_tokens=5)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "max_tokens" and "max_completion_tokens" in error["message"]
