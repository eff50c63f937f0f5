"""Both batch APIs against the providers' own schemas: the embedded gateway's files, batches and message
batches, and the bodies gwlab's batch client sends.

OpenAI: the vendored official schemas (`Batch`, `OpenAIFile`, the listings, `CreateBatchRequest`);
Anthropic: the schemas derived from the installed `anthropic` SDK's `MessageBatch` and
`MessageBatchIndividualResponse` (no official OpenAPI document is public; tests/support/contracts.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from gwlab.client.gateway import Gateway
from tests.support import wait_until
from tests.support.contracts import Recording, anthropic_violations, violations
from tests.support.gateways import RunningGateway
from tests.support.models import TEXT_MODEL

ENDPOINT = "/v1/chat/completions"
BODY = {"model": TEXT_MODEL, "messages": [{"role": "user", "content": "Q: 1+1?\nA:"}], "max_tokens": 2}


def _get(gateway: RunningGateway, path: str, **headers: str) -> Any:
    r = httpx.get(gateway.base_url + path, headers={"Authorization": f"Bearer {gateway.api_key}", **headers},
                  timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_gateway_files_and_batches_match_the_official_schemas(gateway: RunningGateway) -> None:
    auth = {"Authorization": f"Bearer {gateway.api_key}"}
    lines = [json.dumps({"custom_id": c, "method": "POST", "url": ENDPOINT, "body": BODY}) for c in ("a", "b")]
    r = httpx.post(gateway.base_url + "/files", headers=auth, data={"purpose": "batch"},
                   files={"file": ("in.jsonl", ("\n".join(lines) + "\nnot json\n").encode())}, timeout=30)
    file = r.json()
    assert violations(file, "OpenAIFile") == []
    r = httpx.post(gateway.base_url + "/batches", headers=auth, timeout=30,
                   json={"input_file_id": file["id"], "endpoint": ENDPOINT, "completion_window": "24h"})
    created = r.json()
    assert violations(created, "Batch") == []
    wait_until(lambda: _get(gateway, f"/batches/{created['id']}")["status"] == "completed", timeout=240,
               interval=0.1, what="the batch completing")
    done = _get(gateway, f"/batches/{created['id']}")
    assert violations(done, "Batch") == [] and done["output_file_id"] and done["error_file_id"]
    assert violations(_get(gateway, "/batches"), "ListBatchesResponse") == []
    assert violations(_get(gateway, "/files"), "ListFilesResponse") == []
    output = _get(gateway, f"/files/{done['output_file_id']}")
    assert violations(output, "OpenAIFile") == [] and output["purpose"] == "batch_output"
    content = httpx.get(gateway.base_url + f"/files/{done['output_file_id']}/content", headers=auth)
    for line in content.text.splitlines():
        assert violations(json.loads(line)["response"]["body"], "CreateChatCompletionResponse") == []
    cancelled = httpx.post(gateway.base_url + f"/batches/{created['id']}/cancel", headers=auth)
    assert cancelled.status_code == 400  # a completed batch cannot be cancelled; the error body is official
    assert violations(cancelled.json(), "ErrorResponse") == []
    deleted = httpx.delete(gateway.base_url + f"/files/{file['id']}", headers=auth).json()
    assert violations(deleted, "DeleteFileResponse") == []


def test_gateway_message_batches_match_the_anthropic_sdk_types(gateway: RunningGateway) -> None:
    headers = {"x-api-key": gateway.api_key, "anthropic-version": "2023-06-01"}
    params = {"model": TEXT_MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(gateway.base_url + "/messages/batches", headers=headers, timeout=30, json={"requests": [
        {"custom_id": "ok", "params": params}, {"custom_id": "bad", "params": {**params, "max_tokens": "x"}}]})
    created = r.json()
    assert anthropic_violations(created, "MessageBatch") == []

    def ended() -> bool:
        return httpx.get(gateway.base_url + f"/messages/batches/{created['id']}", headers=headers).json()[
            "processing_status"] == "ended"

    wait_until(ended, timeout=240, interval=0.1, what="the message batch ending")
    done = httpx.get(gateway.base_url + f"/messages/batches/{created['id']}", headers=headers).json()
    assert anthropic_violations(done, "MessageBatch") == []
    results = httpx.get(done["results_url"], headers=headers).text.splitlines()
    assert len(results) == 2
    for line in results:
        assert anthropic_violations(json.loads(line), "MessageBatchIndividualResponse") == []


def test_client_batch_bodies_match_the_official_request_schema(gateway: RunningGateway) -> None:
    recording = Recording()
    with Gateway(gateway.base_url, gateway.api_key, http_transport=recording) as gw:
        job = gw.batches.submit([("a", BODY)], endpoint=ENDPOINT)
        gw.batches.cancel(job.id)
    created = [json.loads(body) for method, path, body in recording.sent if path.endswith("/batches")
               and method == "POST"]
    assert len(created) == 1 and violations(created[0], "CreateBatchRequest") == []
