"""Schemathesis against the real gateway: generated valid and invalid requests on every main endpoint,
with the key and with a wrong one. The claim: never a 5xx (nor a server error inside a 200 stream),
never a hang (each request has a timeout), and every refusal is a JSON error body.

FastAPI's /openapi.json describes no request bodies (the routes validate raw JSON themselves), so the
cases come from openapi_gateway.yaml, which describes the real ones. Property tests of the SSE decoder,
the decision validator and the migration helper live in tests/wire (test_sse.py, test_decisions_wire.py,
test_migration_wire.py); the realtime event fuzzer is test_realtime_fuzz.py.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.support.gateways import RunningGateway, own_gateway

# Under an xdist worker schemathesis does not expand a test into one item per operation, so each fuzzes
# one operation (3 of 15 in a `pytest -n 2` run): the module runs whole, serially, apart (make test's
# `fuzz` target), and skips in a worker rather than pass on a fifth of its cases.
if os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.skip("run serially (make test runs it apart): under xdist schemathesis fuzzes one operation a test",
                allow_module_level=True)
SCHEMA = schemathesis.openapi.from_path(Path(__file__).with_name("openapi_gateway.yaml"))
TIMEOUT = 60  # seconds per request: a hang fails the case instead of stalling the suite
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
WRONG_KEY = "gwl_fuzz-wrong-key-0123456789abcdef"
CASES: Counter[str] = Counter()  # operation -> cases sent (with the key, and with the wrong key)
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


@pytest.fixture(scope="module")
def fuzz_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    # a gateway of its own: fuzzed video tasks queue on its renderer, paced slowly so they cost no CPU here
    db = tmp_path_factory.mktemp("fuzz") / "gateway.sqlite"
    with own_gateway(db, "--video-seconds-per-step", "30") as running:
        yield running


def _bounded(case: Any) -> None:
    """Keep generation cheap whatever the case: a missing or large token limit becomes 4 (invalid ones stay)."""
    body = case.body
    if not isinstance(body, dict) or case.operation.path not in ("/v1/chat/completions", "/v1/responses",
                                                                 "/v1/messages"):
        return
    field = {"/v1/chat/completions": "max_tokens", "/v1/responses": "max_output_tokens",
             "/v1/messages": "max_tokens"}[case.operation.path]
    for name in TOKEN_FIELDS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 4:
            body[name] = 4
    if field not in body and "max_completion_tokens" not in body:
        body[field] = 4
    if isinstance(body.get("n"), int) and not isinstance(body.get("n"), bool) and body["n"] > 2:
        body["n"] = 2


def _send(case: Any, gateway: RunningGateway, headers: dict[str, str]) -> Any:
    _bounded(case)
    response = case.call(base_url=gateway.api_host, headers=headers, timeout=TIMEOUT)
    CASES[f"{case.operation.method.upper()} {case.operation.path}"] += 1
    return response


def _check(case: Any, response: Any) -> None:
    where = f"{case.operation.method.upper()} {case.operation.path} -> {response.status_code}"
    assert response.status_code < 500, f"{where}: {response.text[:300]}\n{case.as_curl_command()}"
    media_type = (response.headers.get("content-type") or [""])[0]  # schemathesis keeps header lists
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict) and ("error" in body or "detail" in body), where
    elif media_type.startswith("text/event-stream"):
        assert "server_error" not in response.text and '"api_error"' not in response.text, where


@SCHEMA.include(tag="cheap").parametrize()
@settings(FUZZ, max_examples=30)
def test_cheap_endpoints_never_answer_5xx_or_hang(case: Any, fuzz_gateway: RunningGateway) -> None:
    _check(case, _send(case, fuzz_gateway, {"Authorization": f"Bearer {fuzz_gateway.api_key}"}))


@SCHEMA.include(tag="generating").parametrize()
@settings(FUZZ, max_examples=8)
def test_generating_endpoints_never_answer_5xx_or_hang(case: Any, fuzz_gateway: RunningGateway) -> None:
    _check(case, _send(case, fuzz_gateway, {"Authorization": f"Bearer {fuzz_gateway.api_key}"}))


@SCHEMA.include(tag="tasks").parametrize()
@settings(FUZZ, max_examples=10)
def test_video_submissions_never_answer_5xx_or_hang(case: Any, fuzz_gateway: RunningGateway) -> None:
    _check(case, _send(case, fuzz_gateway, {"Authorization": f"Bearer {fuzz_gateway.api_key}"}))


@SCHEMA.parametrize()
@settings(FUZZ, max_examples=8)
def test_every_endpoint_refuses_a_wrong_key_with_401(case: Any, fuzz_gateway: RunningGateway) -> None:
    response = _send(case, fuzz_gateway, {"Authorization": f"Bearer {WRONG_KEY}"})
    _check(case, response)
    # a path or method no route serves is refused by routing, before any credential is read
    unrouted = response.status_code == 405 or (response.status_code == 404 and "Unknown path" in response.text)
    assert response.status_code == 401 or unrouted, f"{case.operation.path}: {response.status_code}"
    assert WRONG_KEY not in response.text


def _strings(value: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every string value in a JSON body."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(item, str):
            yield value, key
        else:
            yield from _strings(item)


def _with_lone_surrogates(case: Any) -> int:
    """Hypothesis never draws lone surrogates (its text strategy leaves out category Cs), so add them: one
    in every string of the generated body, at a place that depends on the string. Returns how many."""
    spots = list(_strings(case.body))
    for container, key in spots:
        text = container[key]
        at = len(text) // 2
        container[key] = text[:at] + ("\ud800", "\udfff", "\udc00x")[len(text) % 3] + text[at:]
    return len(spots)


@SCHEMA.include(tag="cheap").parametrize()
@settings(FUZZ, max_examples=15)
def test_lone_surrogates_on_cheap_endpoints_are_4xx(case: Any, fuzz_gateway: RunningGateway) -> None:
    mutated = _with_lone_surrogates(case)
    response = _send(case, fuzz_gateway, {"Authorization": f"Bearer {fuzz_gateway.api_key}"})
    _check(case, response)
    assert not mutated or 400 <= response.status_code < 500, f"{case.operation.path}: {response.status_code}"


@SCHEMA.include(tag="generating").parametrize()
@settings(FUZZ, max_examples=6)
def test_lone_surrogates_on_generating_endpoints_are_4xx(case: Any, fuzz_gateway: RunningGateway) -> None:
    mutated = _with_lone_surrogates(case)
    response = _send(case, fuzz_gateway, {"Authorization": f"Bearer {fuzz_gateway.api_key}"})
    _check(case, response)
    assert not mutated or 400 <= response.status_code < 500, f"{case.operation.path}: {response.status_code}"


def test_the_fuzzer_sent_at_least_1000_cases() -> None:
    total = sum(CASES.values())
    if not total:
        pytest.skip("run with the fuzz tests above (this one only adds up their cases)")
    print(f"\nschemathesis: {total} cases over {len(CASES)} operations, 0 5xx, 0 hangs")
    for operation, count in sorted(CASES.items()):
        print(f"  {count:5d}  {operation}")
    assert total >= 1000
