"""A loopback stub of both providers' batch APIs whose outcomes a test scripts (the fault suite).

OpenAI files + batches and Anthropic message batches, in memory. Each answer echoes its request's last
user message (`echo:<text>`), so a result given to the wrong row is seen; usage is fixed per answer and
the stub counts what it billed per custom id, so a test can check 0 billed twice and the run's cost.
A `Script` says how each created job ends: which share finishes, in which order, which lines are
duplicated, dropped, made unknown or errored, whether the create answer is lost, how many polls a job
stays validating.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE_IN, USAGE_OUT = 11, 3  # tokens billed per answered request
WINDOW = 24 * 3600  # the stub's completion window, in its batch objects' expires_at


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass
class Script:
    """How the next jobs end (one Script for every job of the stub unless `per_job` is given)."""

    end: str = "completed"  # completed | expired | cancelled (on cancel) | failed
    finished_share: float = 1.0  # of the lines, finished before the end (the rest: expired/cancelled)
    polls_before_end: int = 1  # retrieves that see in_progress first
    validating_polls: int = 0  # retrieves that see validating first (stuck past the window: end=expired, share 0)
    shuffle: bool = True
    duplicate: int = 0  # lines repeated in the output file
    missing: int = 0  # finished lines left out of every file
    unknown: int = 0  # lines for ids never sent
    errored: int = 0  # finished lines answered with a 400 in the error file
    lose_create: int = 0  # creates accepted whose answer is lost (connection closed)
    wait_cancel: bool = False  # stay in_progress until cancelled


@dataclass
class StubState:
    script: Script
    files: dict[str, bytes] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    creates: int = 0  # create calls that made a job
    billed: dict[str, int] = field(default_factory=dict)  # custom id -> times billed
    submitted: dict[str, int] = field(default_factory=dict)  # custom id -> times submitted in a job
    lock: threading.Lock = field(default_factory=threading.Lock)

    def billed_usage(self) -> tuple[int, int]:
        n = sum(self.billed.values())
        return n * USAGE_IN, n * USAGE_OUT


def _echo(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    last = messages[-1]["content"] if messages else body.get("input", "")
    return f"echo:{last if isinstance(last, str) else json.dumps(last)}"


def _chat_answer(cid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"chatcmpl-{cid[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"), "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                                             "message": {"role": "assistant", "content": _echo(body)}}],
            "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                      "total_tokens": USAGE_IN + USAGE_OUT}}


def _message_answer(cid: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"msg_{cid[:12]}", "type": "message", "role": "assistant", "model": params.get("model", "stub"),
            "content": [{"type": "text", "text": _echo(params)}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}


class _Job:
    """One job's fate, decided at creation from the script; rendered as either API."""

    def __init__(self, state: StubState, api: str, job_id: str, requests: list[tuple[str, dict[str, Any]]]) -> None:
        self.state, self.api, self.id, self.requests = state, api, job_id, requests
        self.script = state.script
        self.polls, self.cancelled, self.ended = 0, False, False
        self.status = "validating"
        self.metadata: dict[str, Any] = {}
        self.created = time.time()
        self.ended_at: float | None = None
        self.results: list[tuple[str, str, dict[str, Any] | None]] = []  # (cid, kind, answer or error)

    def poll(self) -> str:
        """The status after one more retrieve (the end is decided here, once)."""
        s = self.script
        self.polls += 1
        if self.ended:
            return self.status
        if self.polls <= s.validating_polls:
            self.status = "validating"
        elif self.cancelled or (not s.wait_cancel and self.polls > s.validating_polls + s.polls_before_end):
            self._end()
        else:
            self.status = "in_progress"
        return self.status

    def _end(self) -> None:
        s, rng = self.script, random.Random(7)
        end = "cancelled" if self.cancelled else s.end
        n_done = round(len(self.requests) * (s.finished_share if end != "completed" else 1.0))
        done, rest = self.requests[:n_done], self.requests[n_done:]
        with self.state.lock:
            for cid, _ in done:
                self.state.billed[cid] = self.state.billed.get(cid, 0) + 1
        answered = done[s.missing:]  # the first `missing` finished lines vanish (billed all the same)
        for i, (cid, body) in enumerate(answered):
            if i < s.errored:
                self.results.append((cid, "errored", {"message": f"bad request {cid[:6]}", "code": "invalid"}))
            else:
                make = _message_answer if self.api == "anthropic" else _chat_answer
                self.results.append((cid, "succeeded", make(cid, body)))
        gone = "expired" if end in ("expired", "failed") else "canceled"
        self.results += [(cid, gone, None) for cid, _ in rest]
        self.results += [self.results[i] for i in range(min(s.duplicate, len(self.results)))]
        self.results += [(f"unknown{i}", "succeeded", _chat_answer(f"unknown{i}", {})) for i in range(s.unknown)]
        if s.shuffle:
            rng.shuffle(self.results)
        self.status, self.ended, self.ended_at = end, True, time.time()

    @property
    def counts(self) -> dict[str, int]:
        ok = sum(1 for _, k, _ in self.results if k == "succeeded") if self.ended else 0
        return {"total": len(self.requests), "completed": ok, "failed": len(self.requests) - ok if self.ended else 0}

    def openai(self) -> dict[str, Any]:
        status = self.status
        if self.cancelled and not self.ended:
            status = "cancelling"
        has_out = any(k == "succeeded" for _, k, _ in self.results)
        has_err = any(k != "succeeded" for _, k, _ in self.results)
        return {"id": self.id, "object": "batch", "endpoint": "/v1/chat/completions", "status": status,
                "input_file_id": f"file-in-{self.id}", "completion_window": "24h", "created_at": int(self.created),
                "expires_at": int(self.created) + WINDOW,
                **({f"{status}_at": int(self.ended_at)} if self.ended_at else {}),
                "output_file_id": f"file-out-{self.id}" if has_out else None,
                "error_file_id": f"file-err-{self.id}" if has_err else None,
                "request_counts": self.counts, "metadata": self.metadata}

    def anthropic(self) -> dict[str, Any]:
        kinds = {k: 0 for k in ("succeeded", "errored", "canceled", "expired")}
        seen: set[str] = set()
        for cid, k, _ in self.results:
            if cid not in seen and not cid.startswith("unknown"):
                seen.add(cid)
                kinds[k] = kinds.get(k, 0) + 1
        processing = 0 if self.ended else len(self.requests)
        return {"id": self.id, "type": "message_batch",
                "processing_status": "ended" if self.ended else ("canceling" if self.cancelled else "in_progress"),
                "request_counts": {"processing": processing, **kinds},
                "created_at": _iso(self.created),
                "ended_at": _iso(self.ended_at), "expires_at": _iso(self.created + WINDOW), "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"/v1/messages/batches/{self.id}/results" if self.ended else None}

    def openai_file(self, which: str) -> bytes:
        lines = []
        for cid, kind, payload in self.results:
            if which == "out" and kind == "succeeded":
                lines.append({"id": f"r-{cid}", "custom_id": cid, "error": None,
                              "response": {"status_code": 200, "request_id": "x", "body": payload}})
            elif which == "err" and kind == "errored":
                lines.append({"id": f"r-{cid}", "custom_id": cid, "error": None,
                              "response": {"status_code": 400, "body": {"error": payload}}})
            elif which == "err" and kind in ("expired", "canceled"):
                code = "batch_expired" if kind == "expired" else "batch_cancelled"
                lines.append({"id": f"r-{cid}", "custom_id": cid, "response": None,
                              "error": {"code": code, "message": kind}})
        return "".join(json.dumps(x) + "\n" for x in lines).encode()

    def anthropic_results(self) -> bytes:
        lines = []
        for cid, kind, payload in self.results:
            if kind == "succeeded":
                result: dict[str, Any] = {"type": "succeeded", "message": payload}
            elif kind == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": payload["message"]}}}
            else:
                result = {"type": kind}
            lines.append({"custom_id": cid, "result": result})
        return "".join(json.dumps(x) + "\n" for x in lines).encode()


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, media: str = "application/json") -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", media)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("content-length") or 0))

        def _lost(self) -> bool:
            with state.lock:
                if state.script.lose_create > 0:
                    state.script.lose_create -= 1
                    return True
            return False

        def do_POST(self) -> None:
            path, raw = self.path.split("?")[0], self._body()
            if path == "/v1/files":
                file_id = f"file-{len(state.files)}"
                state.files[file_id] = multipart_file(raw, self.headers.get("content-type", ""))
                self._send(200, {"id": file_id, "object": "file", "bytes": len(state.files[file_id]),
                                 "created_at": int(time.time()), "filename": "in.jsonl", "purpose": "batch",
                                 "status": "processed"})
            elif path == "/v1/batches":
                body = json.loads(raw)
                lines = [json.loads(x) for x in state.files[body["input_file_id"]].decode().splitlines() if x]
                job = self._new("openai", f"batch_{len(state.jobs)}", [(x["custom_id"], x["body"]) for x in lines])
                job.metadata = body.get("metadata") or {}
                if self._lost():
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self._send(200, job.openai())
            elif path == "/v1/messages/batches":
                reqs = json.loads(raw)["requests"]
                job = self._new("anthropic", f"msgbatch_{len(state.jobs)}", [(r["custom_id"], r["params"])
                                                                              for r in reqs])
                if self._lost():
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self._send(200, job.anthropic())
            elif path.endswith("/cancel"):
                job = state.jobs[path.split("/")[-2]]
                job.cancelled = True
                self._send(200, job.anthropic() if job.api == "anthropic" else job.openai())
            else:
                self._send(404, {"error": {"message": f"no route {path}", "code": None}})

        def _new(self, api: str, job_id: str, requests: list[tuple[str, dict[str, Any]]]) -> _Job:
            with state.lock:
                job = state.jobs[job_id] = _Job(state, api, job_id, requests)
                state.creates += 1
                for cid, _ in requests:
                    state.submitted[cid] = state.submitted.get(cid, 0) + 1
            return job

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            parts = path.strip("/").split("/")
            if path == "/v1/batches":
                jobs = [j.openai() for j in reversed(state.jobs.values()) if j.api == "openai"]
                self._send(200, {"object": "list", "data": jobs, "has_more": False})
            elif path == "/v1/messages/batches":
                jobs = [j.anthropic() for j in reversed(state.jobs.values()) if j.api == "anthropic"]
                self._send(200, {"data": jobs, "has_more": False})
            elif parts[:2] == ["v1", "batches"] and len(parts) == 3:
                job = state.jobs[parts[2]]
                job.poll()
                self._send(200, job.openai())
            elif parts[:3] == ["v1", "messages", "batches"] and len(parts) == 4:
                job = state.jobs[parts[3]]
                job.poll()
                self._send(200, job.anthropic())
            elif parts[:3] == ["v1", "messages", "batches"] and parts[-1] == "results":
                self._send(200, state.jobs[parts[3]].anthropic_results(), "application/binary")
            elif parts[:2] == ["v1", "files"] and parts[-1] == "content":
                kind, _, job_id = parts[2].removeprefix("file-").partition("-")
                self._send(200, state.jobs[job_id].openai_file(kind), "application/jsonl")
            else:
                self._send(404, {"error": {"message": f"no route {path}", "code": None}})

    return Handler


def multipart_file(raw: bytes, content_type: str) -> bytes:
    """The file part of a multipart body (the stub's only upload)."""
    boundary = content_type.split("boundary=")[1].strip('"').encode()
    for part in raw.split(b"--" + boundary):
        head, _, data = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return data.rstrip(b"\r\n")
    raise ValueError("no file part")


@contextmanager
def batch_stub(script: Script | None = None) -> Iterator[tuple[str, StubState]]:
    """The stub's `/v1` base URL and its state while the block runs."""
    state = StubState(script or Script())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
