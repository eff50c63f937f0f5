"""A loopback server that replays recorded provider batch responses (tests/client/batch_recordings/).

OpenAI: upload -> the recorded file; create -> the batch validating; each retrieve -> in progress once,
then completed; the output and error files' contents; the listing. Anthropic: create -> in progress;
retrieve -> in progress once, then ended; the results; the listing. What the client sent (the uploaded
lines, the create bodies) is kept for the test to check against the official schemas.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.batch_stub import multipart_file
from tests.support.http_stub import serving

RECORDINGS = Path(__file__).resolve().parents[1] / "client" / "batch_recordings"


def recording(name: str) -> Any:
    """A recorded object (.json) or the raw bytes of a recorded file (.jsonl)."""
    path = RECORDINGS / name
    return path.read_bytes() if path.suffix == ".jsonl" else json.loads(path.read_text())


@dataclass
class Replayed:
    """What the client sent, and how many times each batch was retrieved."""

    uploads: list[bytes] = field(default_factory=list)
    creates: list[dict[str, Any]] = field(default_factory=list)
    retrieves: dict[str, int] = field(default_factory=dict)


def _routes(sent: Replayed) -> dict[tuple[str, str], Any]:
    openai = recording("openai_batch_completed.json")
    anthropic = recording("anthropic_batch_ended.json")

    def poll(job_id: str, running: str, ended: str) -> Any:
        sent.retrieves[job_id] = sent.retrieves.get(job_id, 0) + 1
        return recording(running if sent.retrieves[job_id] == 1 else ended)

    return {
        ("POST", "/v1/files"): lambda: recording("openai_file.json"),
        ("POST", "/v1/batches"): lambda: recording("openai_batch_validating.json"),
        ("GET", "/v1/batches"): lambda: recording("openai_batches_list.json"),
        ("GET", f"/v1/batches/{openai['id']}"): lambda: poll(openai["id"], "openai_batch_in_progress.json",
                                                             "openai_batch_completed.json"),
        ("GET", f"/v1/files/{openai['output_file_id']}/content"): lambda: recording("openai_output.jsonl"),
        ("GET", f"/v1/files/{openai['error_file_id']}/content"): lambda: recording("openai_errors.jsonl"),
        ("POST", "/v1/messages/batches"): lambda: recording("anthropic_batch_in_progress.json"),
        ("GET", "/v1/messages/batches"): lambda: {"data": [anthropic], "has_more": False,
                                                 "first_id": anthropic["id"], "last_id": anthropic["id"]},
        ("GET", f"/v1/messages/batches/{anthropic['id']}"): lambda: poll(
            anthropic["id"], "anthropic_batch_in_progress.json", "anthropic_batch_ended.json"),
        ("GET", f"/v1/messages/batches/{anthropic['id']}/results"): lambda: recording("anthropic_results.jsonl"),
    }


def _handler(sent: Replayed) -> type[BaseHTTPRequestHandler]:
    routes = _routes(sent)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, method: str) -> None:
            path = self.path.split("?")[0]
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if path == "/v1/files":
                sent.uploads.append(multipart_file(raw, self.headers.get("content-type", "")))
            elif method == "POST" and path in ("/v1/batches", "/v1/messages/batches"):
                sent.creates.append(json.loads(raw))
            route = routes.get((method, path))
            status, body = (200, route()) if route else (404, {"error": {"message": f"no route {path}"}})
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/binary" if isinstance(body, bytes) else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    return Handler


@contextmanager
def batch_replay() -> Iterator[tuple[str, Replayed]]:
    """The replay server's `/v1` base URL and what the client sent to it, while the block runs."""
    sent = Replayed()
    with serving(_handler(sent)) as url:
        yield url, sent
