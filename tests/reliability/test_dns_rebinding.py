"""Issue 30, finding 7: the gateway answers only to names of its own, says so loudly when it listens
beyond loopback, and serves no API description to strangers.

DNS rebinding: a page on evil.example points its name at 127.0.0.1 and the browser then sends the
gateway `Host: evil.example:PORT`. Before the fix any Host was accepted."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gwlab.local.hosts import exposure_warning, host_allowed
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway
from tests.support.models import REALTIME_MODEL as REALTIME


def _get(gateway: RunningGateway, host: str | None, path: str = "/models") -> httpx.Response:
    headers = {"Authorization": f"Bearer {gateway.api_key}"} | ({"Host": host} if host else {})
    return httpx.get(f"{gateway.base_url}{path}", headers=headers, timeout=60)


def _port(gateway: RunningGateway) -> int:
    return httpx.URL(gateway.base_url).port or 80


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "localhost.evil.example", "[::2]:{port}", "10.1.2.3"])
def test_a_request_naming_another_host_is_refused(gateway: RunningGateway, host: str) -> None:
    r = _get(gateway, host.format(port=_port(gateway)))
    assert r.status_code == 400 and r.json()["error"]["param"] == "Host", r.text
    assert r.json()["error"]["code"] == "invalid_host" and gateway.api_key not in r.text


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "127.0.0.1", None])
def test_a_request_naming_this_gateway_is_served(gateway: RunningGateway, host: str | None) -> None:
    assert _get(gateway, host.format(port=_port(gateway)) if host else None).status_code == 200


def test_a_realtime_handshake_naming_another_host_is_refused(gateway: RunningGateway) -> None:
    # the URL names evil.example (its Host header), the socket goes to the gateway: as after a rebinding
    url = f"ws://evil.example:{_port(gateway)}/v1/realtime?model={REALTIME}"
    headers = {"Authorization": f"Bearer {gateway.api_key}", "OpenAI-Beta": "realtime=v1"}
    sock = socket.create_connection(("127.0.0.1", _port(gateway)), timeout=60)
    with pytest.raises(InvalidStatus) as refused, connect(url, sock=sock, additional_headers=headers,
                                                         open_timeout=60):
        pass
    assert refused.value.response.status_code == 403


@pytest.mark.parametrize("key", [True, False])
def test_the_openapi_document_is_not_served(gateway: RunningGateway, key: bool) -> None:
    headers = {"Authorization": f"Bearer {gateway.api_key}"} if key else {}
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(gateway.api_host + path, headers=headers, timeout=60).status_code == 404, path


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningGateway, str]]:
    """`gwlab serve --host 0.0.0.0 --allow-host lab.internal`, with what it wrote to stderr at start."""
    db = Path(tmp_path_factory.mktemp("exposed")) / "gateway.sqlite"
    running = start_gateway(db, "--host", "0.0.0.0", "--allow-host", "lab.internal", stderr=subprocess.PIPE)
    assert running.process.stderr is not None
    warning = running.process.stderr.readline()
    yield running, warning
    stop_gateway(running)


def test_binding_beyond_loopback_warns_on_stderr(exposed: tuple[RunningGateway, str]) -> None:
    gateway, warning = exposed
    assert gateway.base_url.startswith("http://0.0.0.0:")
    assert "WARNING" in warning and "plain HTTP" in warning and "0.0.0.0" in warning


@pytest.mark.parametrize("host", ["lab.internal", "lab.internal:{port}", "0.0.0.0:{port}", "127.0.0.1:{port}"])
def test_an_exposed_gateway_serves_its_addresses_and_the_names_allowed(exposed: tuple[RunningGateway, str],
                                                                       host: str) -> None:
    gateway, _ = exposed
    assert _get(gateway, host.format(port=_port(gateway))).status_code == 200


def test_an_exposed_gateway_still_refuses_other_names(exposed: tuple[RunningGateway, str]) -> None:
    gateway, _ = exposed
    assert _get(gateway, "evil.example").status_code == 400


def test_loopback_binds_do_not_warn() -> None:
    assert [exposure_warning(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.5")] == [None] * 5
    assert all(exposure_warning(h) for h in ("0.0.0.0", "::", "192.168.1.5", "myhost"))


@pytest.mark.parametrize(("host", "local", "allowed"), [
    ("192.168.1.5:8000", "192.168.1.5", True),      # a LAN client naming the address it connected to
    ("192.168.1.6:8000", "192.168.1.5", False),
    ("localhost:8000", "192.168.1.5", False),       # localhost means loopback, not this interface
    ("[::1]:8000", "::1", True),
    ("[::ffff:127.0.0.1]:8000", "127.0.0.1", True),
    ("127.0.0.1:8000", "::ffff:127.0.0.1", True),   # a dual-stack socket reports the mapped form
    ("evil.example", "127.0.0.1", False),
    ("testserver", "testserver", True),             # Starlette's TestClient
])
def test_host_is_checked_against_the_address_the_connection_arrived_on(host: str, local: str,
                                                                        allowed: bool) -> None:
    assert host_allowed(host, (local, 8000), frozenset()) is allowed
