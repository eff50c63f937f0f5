"""A loopback stub gateway for structured answers, shared by the extract, client and grounding tests.

Standard-library HTTP on 127.0.0.1 speaking chat, responses and messages, as a hosted gateway that says
nothing of itself (no models list). What it answers: while `answering(table)` runs, the table's answer for
the first of its source texts found in the first user message (answers that quote the text, paraphrase
it or invent: issue 33); otherwise the structured-output faults of issue 24, chosen by that message's
first word: `good`, `full`, `fix-<fault>` (the fault first, a valid answer when re-asked), `never`
(always invalid JSON). Every request body is kept in REQUESTS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pandas as pd
import pytest

from gwlab.client.dialect import forget
from gwlab.frames.extract import StructuredFallbackWarning
from tests.support.http_stub import serving

KEY = "gwk-extract-stub-key"
SCHEMA = {"product": str, "order": int | None, "sentiment": ["positive", "neutral", "negative"]}
GOOD = {"product": "kettle", "order": 42, "sentiment": "negative"}
FAULTS = {"badjson": '{"product": "kettle", ', "missing": json.dumps({"product": "kettle", "order": 1}),
          "wrongtype": json.dumps({**GOOD, "order": 1.5}), "extra": json.dumps({**GOOD, "colour": "red"}),
          "category": json.dumps({**GOOD, "sentiment": "furious"})}
FULL = {**GOOD, "price": 9.5, "refund": True, "when": "2024-03-01", "tags": ["late", "broken"]}
REQUESTS: list[dict[str, Any]] = []
ANSWERS: dict[str, Mapping[str, Any]] = {}  # source text -> answer object, set by `answering`


def _answer(body: dict[str, Any]) -> str:
    turns = body.get("messages") or body.get("input")
    first = next(t for t in turns if t["role"] == "user")["content"]
    first = first if isinstance(first, str) else first[0]["text"]  # content parts: the first one's text
    chosen = next((answer for text, answer in ANSWERS.items() if text in first), None)
    if chosen is not None:
        return json.dumps(chosen, ensure_ascii=False)
    reasked = any(t["role"] == "assistant" for t in turns)  # a re-ask shows the model its answer
    case = first.split()[0]
    if case == "full":
        return json.dumps(FULL)
    if case == "good" or (case.startswith("fix-") and reasked):
        return json.dumps(GOOD)
    if case.startswith("fix-"):
        return FAULTS[case[4:]]
    return FAULTS["badjson"]


def _reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
    text = _answer(body)
    if path.endswith("/chat/completions"):
        return {"id": "c1", "object": "chat.completion", "model": body["model"], "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    if path.endswith("/responses"):
        return {"id": "r1", "object": "response", "status": "completed", "model": body["model"], "output": [
            {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}
    try:
        block = {"type": "tool_use", "id": "t1", "name": body["tool_choice"]["name"], "input": json.loads(text)}
    except (ValueError, KeyError):
        block = {"type": "text", "text": text}
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5}}


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # no models list
        self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append({"path": self.path, "body": body})
        refused = next((k for k in ("response_format", "text", "tools") if k in body), None)
        if self.path.startswith("/plain/") and refused:  # a gateway without structured output
            return self._send(400, {"error": {"message": f"Unrecognized request argument supplied: {refused}",
                                              "type": "invalid_request_error", "param": refused}})
        return self._send(200, _reply(self.path, body))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def stub_server() -> Iterator[str]:
    """The stub's base URL while the block runs; under `/plain/v1` instead of `/v1` it refuses every
    structured-output field with a 400 naming it, as a gateway without structured output does."""
    with serving(_Stub) as base:
        yield base


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


def assert_extract_falls_back_to_the_prompt(gw: Any, model: str) -> None:
    """`df.gw.extract` on a server that refuses `response_format` with an error naming it: the run asks
    in the prompt instead and says so, and a row is a valid answer or an error row keeping its text
    and reason, never an invented value (the small greedy models often answer otherwise)."""
    forget(gw.base_url)  # what this gateway was found to refuse (its dialect's structured_output)
    mail = pd.DataFrame({"text": ["I was charged twice, please give me my money back."]})
    try:
        with pytest.warns(StructuredFallbackWarning, match="response_format"):
            out = mail.gw.extract("Does this customer ask for a refund? {text}", {"refund": bool}, errors="coerce",
                                  model=model, max_tokens=40, params={"temperature": 0}, gateway=gw,
                                  checkpoint=None, progress=False)
    finally:
        forget(gw.base_url)
    assert "asked in the prompt" in out.run.structured and out["refund"].dtype == "boolean"
    row = out.loc[0]
    if row["__status"] == "sent":
        assert row["refund"] in (True, False)
    else:
        assert row["__status"] == "error" and "AnswerInvalid" in row["__error"] and pd.isna(row["refund"])
        assert row["__raw"] and row["__reasks"] == 1
