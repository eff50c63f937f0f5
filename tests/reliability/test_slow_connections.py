"""Slow and idle connections are closed (issue 30, finding 5): a connection that sends nothing, headers
trickled a line at a time, a body trickled a byte at a time, an idle kept-alive connection; and requests
beyond the concurrency limit are refused with a 503. One `gwlab serve` with short deadlines, set by its flags
(docs/security.md, "Connections"); raw sockets on loopback, every wait bounded."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import wait_until
from tests.support.gateways import RunningGateway, own_gateway

HEADER_S, BODY_S, IDLE_S, CONCURRENCY = 1.0, 2.0, 1.0, 6
BOUND = 20.0  # seconds: far beyond every deadline above, far below the 70 s the probe held a socket open


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    db = Path(tmp_path_factory.mktemp("slow")) / "gateway.sqlite"
    with own_gateway(db, "--header-timeout-s", str(HEADER_S), "--body-timeout-s", str(BODY_S),
                     "--keep-alive-s", str(IDLE_S), "--max-concurrency", str(CONCURRENCY)) as running:
        yield running


def _connect(gateway: RunningGateway) -> socket.socket:
    url = urlsplit(gateway.base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=BOUND)
    return sock


def _closed_while(sock: socket.socket, step: bytes | None, every: float, bound: float = BOUND) -> bytes:
    """Send `step` every `every` seconds (None: send nothing) until the server closes the connection; return
    what it answered. Fails if the connection is still open after `bound` seconds."""
    received, deadline = b"", time.monotonic() + bound
    sock.settimeout(every)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            chunk = None
        except (ConnectionResetError, BrokenPipeError):
            return received
        if chunk == b"":
            return received
        received += chunk or b""
        if step is not None:
            try:
                sock.sendall(step)
            except (ConnectionResetError, BrokenPipeError):
                return received
    raise AssertionError(f"the connection was still open after {bound:g} s (received {received[:200]!r})")


def test_a_connection_that_sends_nothing_is_closed(gateway) -> None:
    with closing(_connect(gateway)) as sock:
        assert _closed_while(sock, None, 0.2) == b""


def test_headers_trickled_a_line_at_a_time_are_cut_off(gateway) -> None:
    with closing(_connect(gateway)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        # a new header line every 0.3 s, forever: the whole head never arrives in time
        assert _closed_while(sock, b"X-Slow: 1\r\n", 0.3) == b""


def test_a_body_trickled_a_byte_at_a_time_is_answered_408_and_closed(gateway) -> None:
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {gateway.api_key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{").encode()
    with closing(_connect(gateway)) as sock:
        sock.sendall(head)
        answer = _closed_while(sock, b" ", 0.3)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"param":"body"' in answer and b"connection: close" in answer.lower()


def test_an_idle_kept_alive_connection_is_closed(gateway) -> None:
    with closing(_connect(gateway)) as sock:
        sock.sendall(f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {gateway.api_key}\r\n\r\n"
                     .encode())
        answer = _closed_while(sock, None, 0.2)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]  # answered, kept alive, then closed when idle


def test_a_kept_alive_connection_serves_a_second_request_sent_in_time(gateway) -> None:
    request = f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {gateway.api_key}\r\n\r\n".encode()
    with closing(_connect(gateway)) as sock:
        for _ in range(2):
            sock.sendall(request)
            assert _read_status(sock) == 200


def _read_status(sock: socket.socket) -> int:
    sock.settimeout(BOUND)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before answering"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split(b" ")[1])


def test_requests_past_the_concurrency_limit_are_refused_503_until_connections_free(gateway) -> None:
    request = f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {gateway.api_key}\r\n\r\n".encode()

    def status(holding: int) -> int:
        """A request's status while `holding` other connections are open (silent: the header deadline
        closes them after a second, so each attempt opens its own)."""
        held = [_connect(gateway) for _ in range(holding)]
        try:
            with closing(_connect(gateway)) as sock:
                sock.sendall(request)
                return _read_status(sock)
        finally:
            for sock in held:
                sock.close()

    # the server counts a connection once it has accepted it: ask until it has
    wait_until(lambda: status(CONCURRENCY) == 503, timeout=BOUND, interval=0.2, what="a 503 at the limit")
    assert wait_until(lambda: status(0) == 200, timeout=BOUND, interval=0.2, what="a 200 below the limit")


async def test_a_websocket_session_outlives_the_header_deadline(gateway) -> None:
    """The header deadline ends with the upgrade: a realtime session stays open past it."""
    import asyncio

    from tests.support.realtime import connect

    async with connect(gateway) as rt:
        await asyncio.sleep(3 * max(HEADER_S, IDLE_S))
        await rt.send({"type": "session.update", "session": {"instructions": "Be brief."}})
        assert (await rt.recv())["type"] == "session.updated"
