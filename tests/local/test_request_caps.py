"""Caps on one request's work (issue 30, finding 3): generated tokens over all choices (n x the token cap)
and the number of tools, each a 400 naming the field to change, on the three text routes; a request within
the caps is served. The suite's gateway runs the default limits (gwlab/local/limits.py, docs/security.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gwlab.local.limits import Limits
from tests.support.gateways import RunningGateway
from tests.support.models import TEXT_MODEL

CAP, TOOLS = Limits().max_request_tokens, Limits().max_tools
USER = [{"role": "user", "content": "Say hi."}]
SCHEMA = {"type": "object", "properties": {}}


def _post(gateway: RunningGateway, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {gateway.api_key}", "anthropic-version": "2023-06-01"}
    return httpx.post(f"{gateway.base_url}{path}", json={"model": TEXT_MODEL, **body}, headers=headers,
                      timeout=httpx.Timeout(120))


def _tools(path: str, count: int) -> list[dict[str, Any]]:
    if path == "/chat/completions":
        return [{"type": "function", "function": {"name": f"t{i}", "parameters": SCHEMA}} for i in range(count)]
    if path == "/responses":
        return [{"type": "function", "name": f"t{i}", "parameters": SCHEMA} for i in range(count)]
    return [{"name": f"t{i}", "input_schema": SCHEMA} for i in range(count)]


TOKEN_CASES = [
    ("/chat/completions", {"messages": USER, "n": 2, "max_tokens": CAP // 2 + 1}, "n"),
    ("/chat/completions", {"messages": USER, "n": 8, "max_completion_tokens": CAP // 8 + 1}, "n"),
    ("/chat/completions", {"messages": USER, "max_completion_tokens": CAP + 1}, "max_completion_tokens"),
    ("/chat/completions", {"messages": USER, "max_tokens": CAP + 1, "stream": True}, "max_tokens"),
    ("/responses", {"input": "Say hi.", "max_output_tokens": CAP + 1}, "max_output_tokens"),
    ("/messages", {"messages": USER, "max_tokens": CAP + 1}, "max_tokens"),
]


@pytest.mark.parametrize(("path", "body", "param"), TOKEN_CASES)
def test_more_generated_tokens_than_the_cap_is_a_400_naming_the_field(
        gateway: RunningGateway, path: str, body: dict[str, Any], param: str) -> None:
    r = _post(gateway, path, body)
    assert r.status_code == 400, r.text[:300]
    assert f"'{param}'" in r.text and str(CAP) in r.text
    if path != "/messages":
        assert r.json()["error"]["param"] == param


@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/messages"])
def test_more_tools_than_the_cap_is_a_400_naming_tools(gateway: RunningGateway, path: str) -> None:
    body = {"messages": USER} if path != "/responses" else {"input": "Say hi."}
    cap_field = {"/chat/completions": "max_tokens", "/responses": "max_output_tokens", "/messages": "max_tokens"}
    r = _post(gateway, path, {**body, "tools": _tools(path, TOOLS + 1), cap_field[path]: 16})
    assert r.status_code == 400, r.text[:300]
    assert "'tools'" in r.text and str(TOOLS) in r.text
    if path != "/messages":
        assert r.json()["error"]["param"] == "tools"


def test_a_request_at_the_caps_is_served(gateway: RunningGateway) -> None:
    r = _post(gateway, "/chat/completions", {"messages": USER, "n": 2, "max_tokens": 3,
                                             "tools": _tools("/chat/completions", TOOLS), "tool_choice": "none"})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["choices"]) == 2
