"""The primitives under every loopback server: a free port, a bounded wait, an ASGI app served in a thread."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    """A TCP port free on loopback now (for a server a test or a benchmark starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05,
               what: str = "the condition") -> Any:
    """Poll `predicate` until it returns something truthy, and return that; bounded, so a condition that
    never holds fails with its last value after `timeout` seconds instead of hanging the run.

    `predicate` may raise to give up early (a process it waits on has died)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:g} s (last value {value!r})")
        time.sleep(interval)
    return value


async def wait_until_async(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05,
                           what: str = "the condition") -> Any:
    """`wait_until` for a coroutine: polls without blocking the event loop the condition depends on."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:g} s (last value {value!r})")
        await asyncio.sleep(interval)
    return value


@contextmanager
def serve_app(app: Any, timeout_keep_alive: int = 5) -> Iterator[str]:
    """`app` served by uvicorn on a free loopback port, in a daemon thread; yields `http://127.0.0.1:PORT`
    once it accepts connections, and stops it at the end."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=timeout_keep_alive)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=60, interval=0.01,
                   what="the loopback server's start")
        if not server.started:
            raise RuntimeError("the loopback server stopped before it started")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
