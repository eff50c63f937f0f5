"""A loopback stub gateway for the pandas-layer benchmarks: answers decisions after a fixed latency.

Run alone: `python bench/frames_stub.py --latency 0.05` prints its base URL, then serves until killed.
It is a bare asyncio protocol (HTTP/1.1 keep-alive, Content-Length bodies), not an ASGI server: the stub
shares the machine's cores with the client being measured, so every microsecond it spends is one the
client loses, and uvicorn's per-request machinery cost a raw socket client 0.93 -> 0.89 of C/L in the
same run (docs/benchmarks.md). Each request is answered by a timer `latency` seconds after its body
arrived. Every answer has the System One shape for the questions asked; usage counts one token per
four characters of state plus ten per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from typing import Any

HEAD_END = b"\r\n\r\n"
MAX_HEAD = 64 * 1024


def answer(question: dict[str, Any]) -> dict[str, Any]:
    kind = question.get("type")
    if kind == "noul":
        return {"type": "noul", "noul": 0.7}
    criteria = question.get("criteria") or []
    options = list(criteria) if kind == "choice" else [str(i) for i in range(len(criteria))]
    p = 1.0 / max(1, len(options))
    probabilities = dict.fromkeys(options, p)
    if kind == "choice":
        return {"type": "choice", "choice": options[0], "confidence": 0.1, "probabilities": probabilities}
    legend = {str(i): text for i, text in enumerate(criteria)}
    return {"type": "score", "score": (len(options) - 1) / 2, "confidence": 0.1, "legend": legend,
            "probabilities": probabilities}


def decide(body: bytes) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer for one decisions request body."""
    try:
        request = json.loads(body)
        questions = request["questions"]
        state = request["state"] if isinstance(request["state"], str) else json.dumps(request["state"])
        return 200, {"model": request.get("model"), "answers": {q: answer(v) for q, v in questions.items()},
                     "usage": {"input_tokens": len(state) // 4 + 10 * len(questions), "output_tokens": 0}}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return 400, {"error": {"message": f"bad request: {exc}"}}


def response(status: int, data: dict[str, Any]) -> bytes:
    payload = json.dumps(data).encode()
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 411: b"Length Required"}[status]
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"x-request-id: req_stub\r\n\r\n" % (status, reason, len(payload))) + payload


class StubProtocol(asyncio.Protocol):
    """One keep-alive connection: splits the byte stream into requests and answers each after the latency."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (request := self.next_request()) is not None:
            method, path, body = request
            if method == b"POST" and path.endswith(b"/decisions"):
                asyncio.get_running_loop().call_later(self.latency, self.reply, body)
            else:
                self.send(response(404, {"error": {"message": "the stub serves POST /v1/decisions only"}}))

    def next_request(self) -> tuple[bytes, bytes, bytes] | None:
        end = self.buffer.find(HEAD_END)
        if end < 0:
            if len(self.buffer) > MAX_HEAD:
                self.fail(400, "request head too large")
            return None
        lines = self.buffer[:end].split(b"\r\n")
        method, path, _ = [*lines[0].split(b" "), b"", b""][:3]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        if b"transfer-encoding" in headers:
            self.fail(411, "send a Content-Length body")
            return None
        length = int(headers.get(b"content-length", b"0"))
        if len(self.buffer) < end + 4 + length:
            return None
        body = self.buffer[end + 4:end + 4 + length]
        self.buffer = self.buffer[end + 4 + length:]
        return method, path, body

    def reply(self, body: bytes) -> None:
        self.send(response(*decide(body)))

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def fail(self, status: int, message: str) -> None:
        self.send(response(status, {"error": {"message": message}}))
        self.buffer = b""
        if self.transport is not None:
            self.transport.close()


async def serve(sock: socket.socket, latency: float) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: StubProtocol(latency), sock=sock,
                                                            backlog=4096)
    await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and a plain
    # socket.socket() says 0, so Nagle + delayed ACK would add ~40 ms to every keep-alive response
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(4096)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    asyncio.run(serve(sock, args.latency))


if __name__ == "__main__":
    main()
