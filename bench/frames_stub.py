"""A loopback stub gateway for the pandas-layer benchmarks: answers decisions after a fixed latency.

Run alone: `python bench/frames_stub.py --latency 0.05` prints its base URL, then serves until killed.
A bare ASGI app on uvicorn (httptools, no access log), so the stub costs little CPU next to the client
being measured. Every answer has the System One shape for the questions asked, and usage counts one
token per four characters of state plus ten per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from typing import Any

LATENCY = 0.05


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


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    await asyncio.sleep(LATENCY)
    try:
        body = json.loads(b"".join(chunks))
        questions = body["questions"]
        state = body["state"] if isinstance(body["state"], str) else json.dumps(body["state"])
        data = {"model": body.get("model"), "answers": {q: answer(v) for q, v in questions.items()},
                "usage": {"input_tokens": len(state) // 4 + 10 * len(questions), "output_tokens": 0}}
        status = 200
    except (ValueError, KeyError, TypeError) as exc:
        data, status = {"error": {"message": f"bad request: {exc}"}}, 400
    payload = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()), (b"x-request-id", b"req_stub")]})
    await send({"type": "http.response.body", "body": payload})


def main() -> None:
    global LATENCY
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    LATENCY = args.latency
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and a plain
    # socket.socket() says 0, so Nagle + delayed ACK would add ~40 ms to every keep-alive response
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", args.port))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, loop="asyncio",
                            backlog=4096, limit_concurrency=None, timeout_keep_alive=120)
    server = uvicorn.Server(config)
    sys.exit(asyncio.run(server.serve(sockets=[sock])))


if __name__ == "__main__":
    main()
