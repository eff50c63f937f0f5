"""Client CPU per request over each HTTP transport, against `openai.AsyncOpenAI`, same loopback server.

Run: .venv/bin/python bench/client_cpu.py [--requests 2000] [--rounds 5]

gwlab is measured over every transport it can use, side by side in one run: the hand-written fast
path (`http_transport="fast"`, what loopback gateways get), httpx's own transport (`"httpx"`, the
kept library, what every other gateway gets) and httpx-aiohttp (aiohttp's C parser behind httpx,
measured and rejected: docs/benchmarks.md says why); the openai SDK is the peer. Last, it counts
how often each transport sends a video creation whose connection drops after the request was read
(once is right: a resend may create a second billable task).

A tiny uvicorn app in a subprocess answers every POST /v1/chat/completions with a canned chat
completion at once, so what is measured is the client's own work: `time.process_time()` of this
process (user + system CPU, the server's excluded) over N sequential non-streaming requests. The
clients take turns round by round and the median round counts, so a noisy neighbour hurts both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

from harness.loopback import free_port, wait_until  # bench/harness: this script's folder is on sys.path

BODY = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": "local/gemma-3-270m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris is the capital of France.",
                                         "refusal": None}, "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 14, "completion_tokens": 8, "total_tokens": 22},
}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"x-request-id", b"req_bench"),
           (b"content-length", str(len(BODY)).encode())]
MODEL = "local/gemma-3-270m"
MESSAGES = [{"role": "user", "content": "Q: What is the capital of France?\nA:"}]
KEY = "gwk-bench-not-a-secret"


async def app(scope: dict, receive: Callable, send: Callable) -> None:
    """The canned gateway: drains the request, answers the same completion every time."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


def wait_for(port: int, timeout: float = 20.0) -> None:
    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return False
        return True

    wait_until(accepts, timeout=timeout, what="the bench server's start")


async def cpu_per_request(call: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        await call()
    return (time.process_time() - start) / n


PEER = "openai.AsyncOpenAI"


async def measure(base_url: str, n: int, rounds: int) -> dict[str, list[float]]:
    import openai
    from httpx_aiohttp import AiohttpTransport

    import gwlab

    gateways = {"gwlab fast path": gwlab.AsyncGateway(base_url, KEY, http_transport="fast"),
                "gwlab httpx (kept)": gwlab.AsyncGateway(base_url, KEY, http_transport="httpx"),
                "gwlab httpx-aiohttp": gwlab.AsyncGateway(base_url, KEY, http_transport=AiohttpTransport())}
    assert gateways["gwlab fast path"].http_transport.name == "fast"
    assert gateways["gwlab httpx (kept)"].http_transport.name == "httpx"
    oa = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    clients: dict[str, Callable[[], Awaitable[object]]] = {
        name: (lambda gw=gw: gw.chat.create(MESSAGES, model=MODEL)) for name, gw in gateways.items()}
    clients[PEER] = lambda: oa.chat.completions.create(model=MODEL, messages=MESSAGES)
    for gw in gateways.values():
        assert (await gw.chat.create(MESSAGES, model=MODEL)).text.startswith("Paris")
    results: dict[str, list[float]] = {name: [] for name in clients}
    for call in clients.values():  # warm up: connections, imports, caches
        await cpu_per_request(call, 100)
    for _ in range(rounds):
        for name, call in clients.items():
            results[name].append(await cpu_per_request(call, n // rounds))
    for gw in gateways.values():
        await gw.aclose()
    await oa.close()
    return results


async def dropped_post_sends() -> dict[str, int]:
    """How often each transport sends a video creation whose connection drops after the request was
    read: more than once means a second billable task (the retry policy must never resend it)."""
    from httpx_aiohttp import AiohttpTransport

    import gwlab
    from gwlab import errors

    sent: list[bytes] = []

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sent.append(await reader.readuntil(b"\r\n\r\n"))
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    counts = {}
    for name, transport in (("fast path", "fast"), ("httpx (kept)", "httpx"), ("httpx-aiohttp", AiohttpTransport())):
        sent.clear()
        async with gwlab.AsyncGateway(url, KEY, http_transport=transport) as gw:
            with contextlib.suppress(errors.GatewayError):
                await gw.transport.request("POST", "/videos", family="tasks", json={"prompt": "a cat"})
        counts[name] = len(sent)
    server.close()
    await server.wait_closed()
    return counts


def measure_sync(base_url: str, n: int) -> float:
    import gwlab

    with gwlab.Gateway(base_url, KEY) as gw:
        assert gw.http_transport.name == "fast"  # loopback, no proxy: what a user of the embedded gateway gets
        for _ in range(100):
            gw.chat.create(MESSAGES, model=MODEL)
        start = time.process_time()
        for _ in range(n):
            gw.chat.create(MESSAGES, model=MODEL)
        return (time.process_time() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        wait_for(port)
        base_url = f"http://127.0.0.1:{port}/v1"
        results = asyncio.run(measure(base_url, args.requests, args.rounds))
        sync = measure_sync(base_url, args.requests // args.rounds)
    finally:
        server.terminate()
        server.wait(10)
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"{args.requests} non-streaming chat requests per client in {args.rounds} alternating rounds "
          f"(median round, client process CPU per request; ratio to {PEER}):")
    for name, value in medians.items():
        print(f"  {name:22s} {value * 1e6:8.0f} µs  {value / medians[PEER]:5.2f}x")
    print(f"  {'gwlab.Gateway (sync)':22s} {sync * 1e6:8.0f} µs  {sync / medians[PEER]:5.2f}x  "
          f"(fast path via the loop thread, one round)")
    fast, kept = medians["gwlab fast path"], medians["gwlab httpx (kept)"]
    print(f"  the fast path costs {fast / kept:.2f}x the kept library's CPU; "
          f"httpx-aiohttp {medians['gwlab httpx-aiohttp'] / kept:.2f}x (goal on loopback: <= 0.5x openai)")
    sends = asyncio.run(dropped_post_sends())
    print("a video creation dropped after sending (retry policy: send once), times sent: "
          + ", ".join(f"{name} {count}" for name, count in sends.items()))


if __name__ == "__main__":
    main()
