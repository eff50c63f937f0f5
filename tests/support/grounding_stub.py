"""A hosted-style chat gateway stub for grounding (issue 33): its answers quote the text, paraphrase it, or
invent, as a test's table says. Standard-library HTTP on loopback (`http_stub.serving`); every request body
is kept in REQUESTS so a test can see what was sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_stub import serving

KEY = "gwk-grounding-stub-key"
REQUESTS: list[dict[str, Any]] = []
# the answer (a JSON object) per source text: the first key found in the last user turn is answered
ANSWERS: dict[str, Mapping[str, Any]] = {}


def _answer(body: dict[str, Any]) -> str:
    last = next(t for t in reversed(body["messages"]) if t["role"] == "user")["content"]
    for text, answer in ANSWERS.items():
        if text in last:
            return json.dumps(answer, ensure_ascii=False)
    return "{}"


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # no models list: a hosted gateway that says nothing of itself
        self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append({"path": self.path, "body": body})
        reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [
            {"index": 0, "message": {"role": "assistant", "content": _answer(body)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        self._send(200, reply)

    def _send(self, status: int, reply: dict[str, Any]) -> None:
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def answering(answers: Mapping[str, Mapping[str, Any]]) -> Iterator[str]:
    """The stub's `/v1` base URL, answering `answers` (source text -> answer object) while the block runs."""
    ANSWERS.clear()
    ANSWERS.update(answers)
    REQUESTS.clear()
    try:
        with serving(_Stub) as base:
            yield base
    finally:
        ANSWERS.clear()
