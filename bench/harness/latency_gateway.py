"""A loopback gateway with a fixed latency that records when each request arrived (bench and tests).

It answers decisions, chat completions, responses and messages in their wire shapes after `latency`
seconds, with answers derived from the request (so a test can tell whose answer a row got), and logs
per request: arrival time (`time.monotonic`), path, SHA-256 of the body, and whether the answer was
delivered. An answer counts as delivered only if the client was still connected when it was sent: a
client killed mid-request (SIGKILL) closes its socket, which the server sees as a disconnect, and its
request is logged as cut, not answered. It can also answer 429 with Retry-After on chosen arrivals and
hold requests (no answer) until released, so a test can kill a worker at a known point.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .loopback import serve_app


@dataclass
class Arrival:
    at: float  # time.monotonic() when the request's body had arrived
    path: str
    digest: str  # SHA-256 of the body: the same request body, the same digest
    peer_port: int
    status: int = 0
    answered: bool = False  # the answer went to a client still connected
    cut: bool = False  # the client went away before its answer
    done: float | None = None  # time.monotonic() when the answer had been sent
    tokens: int = 0  # the input tokens its answer reports (billed)


@dataclass
class LatencyGateway:
    latency: float
    api_key: str = field(repr=False)
    arrivals: list[Arrival] = field(default_factory=list)
    rate_limit_at: set[int] = field(default_factory=set)  # arrival numbers answered 429
    retry_after: float = 1.0
    hold_from: int | None = None  # arrivals numbered from this one wait for `release()`
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._released: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- what the log says ---------------------------------------------------------------------

    def snapshot(self) -> list[Arrival]:
        with self._lock:
            return list(self.arrivals)

    def answered_per_body(self) -> Counter[str]:
        return Counter(a.digest for a in self.snapshot() if a.answered)

    def arrival_times(self, status: int | None = None) -> list[float]:
        return sorted(a.at for a in self.snapshot() if status is None or a.status == status)

    def release(self) -> None:
        """Answer every held request (and every later one)."""
        self.hold_from = None
        if self._loop is not None and self._released is not None:
            self._loop.call_soon_threadsafe(self._released.set)

    # --- the ASGI app --------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if self._released is None:
            self._loop, self._released = asyncio.get_running_loop(), asyncio.Event()
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode()
        if auth != f"Bearer {self.api_key}" and headers.get(b"x-api-key", b"").decode() != self.api_key:
            await _reply(send, 401, {"error": {"type": "invalid_request_error", "message": "bad key"}})
            return
        arrival = Arrival(time.monotonic(), scope["path"], hashlib.sha256(body).hexdigest(), scope["client"][1])
        with self._lock:
            number = len(self.arrivals)
            self.arrivals.append(arrival)
        if number in self.rate_limit_at:
            arrival.status = 429
            await _reply(send, 429, {"error": {"type": "rate_limit_error", "message": "slow down"}},
                         {"retry-after": f"{self.retry_after:g}"})
            return
        held = self.hold_from is not None and number >= self.hold_from
        wait = asyncio.ensure_future(self._released.wait() if held else asyncio.sleep(self.latency))
        gone = asyncio.ensure_future(_disconnected(receive))
        await asyncio.wait([wait, gone], return_when=asyncio.FIRST_COMPLETED)
        if gone.done():
            wait.cancel()
            arrival.cut = True
            return
        gone.cancel()
        if held:
            await asyncio.sleep(self.latency)
        arrival.status = 200
        payload = json.loads(body)
        arrival.tokens = len(json.dumps(payload)) // 4
        await _reply(send, 200, _answer(scope["path"], payload, arrival.digest, arrival.tokens))
        arrival.done, arrival.answered = time.monotonic(), True


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _reply(send: Any, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    data = json.dumps(payload).encode()
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            (b"x-request-id", b"req_" + str(time.monotonic_ns()).encode()), *extra]})
    await send({"type": "http.response.body", "body": data})


def _answer(path: str, body: dict[str, Any], digest: str, tokens: int) -> dict[str, Any]:
    """The family's wire shape; text answers quote the prompt, so a row's answer is recognisably its own."""
    model = body.get("model", "m")
    if path.endswith("/decisions"):
        answers = {}
        for qid, q in body["questions"].items():
            p = int(digest[:4], 16) / 0xFFFF
            if q["type"] == "noul":
                answers[qid] = {"type": "noul", "noul": p}
            else:
                options = list(q["criteria"])
                answers[qid] = {"type": "choice", "choice": options[0], "confidence": 1.0,
                                "probabilities": {o: 1.0 if i == 0 else 0.0 for i, o in enumerate(options)}}
        return {"model": model, "answers": answers, "usage": {"input_tokens": tokens}}
    if path.endswith("/chat/completions"):
        text = "re: " + body["messages"][-1]["content"]
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": tokens, "completion_tokens": 3, "total_tokens": tokens + 3}}
    if path.endswith("/responses"):
        text = "re: " + body["input"]
        return {"id": "resp_1", "object": "response", "status": "completed", "model": model,
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": tokens, "output_tokens": 3, "total_tokens": tokens + 3}}
    text = "re: " + body["messages"][-1]["content"]
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": tokens, "output_tokens": 3}}


@contextmanager
def serving(gateway: LatencyGateway) -> Iterator[LatencyGateway]:
    """`gateway` on a real loopback socket (uvicorn in a thread); held requests are released at the end, so
    the server can stop."""
    with serve_app(gateway, timeout_keep_alive=30) as root:
        gateway.port = int(root.rsplit(":", 1)[1])
        try:
            yield gateway
        finally:
            gateway.release()


def max_overlap(arrivals: list[Arrival]) -> int:
    """The most requests the gateway was serving at once (arrival to answer sent)."""
    events = sorted([(a.at, 1) for a in arrivals if a.done] + [(a.done, -1) for a in arrivals if a.done])
    best = level = 0
    for _, step in events:  # at equal times the end (-1) sorts first: a handover is not an overlap
        level += step
        best = max(best, level)
    return best


def max_in_window(times: list[float], window: float, weights: list[float] | None = None) -> float:
    """The most arrivals (or the largest sum of their `weights`) in any window [t, t + window); a busiest
    window can start at an arrival."""
    pairs = sorted(zip(times, weights or [1] * len(times), strict=True))
    best, end, total = 0, 0, 0
    for start, (t, _) in enumerate(pairs):
        while end < len(pairs) and pairs[end][0] < t + window:
            total += pairs[end][1]
            end += 1
        best = max(best, total)
        total -= pairs[start][1]
    return best
