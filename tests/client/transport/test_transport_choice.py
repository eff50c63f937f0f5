"""Which transport reaches a gateway, and the environment's proxies honoured over real sockets.

The proxy tests start a small recording HTTP forward proxy on loopback and point HTTP_PROXY at it;
the gateway is the real embedded one, addressed as `http://gateway.test:PORT/v1`, a name only the
proxy resolves (to 127.0.0.1). The client's own resolver is made to refuse that name, so the test
never depends on (or sends a query to) the machine's DNS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest

import gwlab
from gwlab import errors
from gwlab.client.transport.choice import choose, is_loopback
from gwlab.wire import limits
from tests.support.fakes import CANARY_KEY, FakeLocal
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway
from tests.support.models import REALTIME_MODEL, TEXT_MODEL

PROXY_VARIABLES = [name for base in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
                   for name in (base, base.upper())]
TEXT = TEXT_MODEL
REALTIME = REALTIME_MODEL


@pytest.fixture(autouse=True)
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy variable but those a test sets (the machine's own would change every answer)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# --- the rule, without sockets ---------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "[::1]", "localhost", "LOCALHOST"])
def test_a_loopback_http_gateway_without_proxy_gets_the_fast_path(host):
    choice = choose(f"http://{host}:8000/v1")
    assert (choice.name, choice.proxy) == ("fast", None)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """The embedded gateway, told that `gateway.test` (the name only the proxy resolves) names it: it refuses
    any other Host (docs/security.md, DNS rebinding)."""
    running = start_gateway(tmp_path_factory.mktemp("proxied") / "gateway.sqlite", "--allow-host", "gateway.test")
    yield running
    stop_gateway(running)


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000/v1", "http://gateway.test/v1", "http://128.0.0.1/v1",
                                 "http://localhost.example.com/v1", "https://127.0.0.1:8443/v1",
                                 "https://api.example.com/v1"])
def test_any_other_gateway_and_https_get_httpx(url):
    assert choose(url).name == "httpx"


def test_loopback_means_127_0_0_0_8_ipv6_loopback_and_localhost():
    assert all(map(is_loopback, ["127.0.0.1", "127.255.0.9", "::1", "localhost", "Localhost."]))
    assert not any(map(is_loopback, ["128.0.0.1", "0.0.0.0", "::", "10.0.0.1", "localhost.example.com"]))


@pytest.mark.parametrize(("env", "proxied"), [
    ({"HTTP_PROXY": "http://proxy.example:3128"}, True),  # loopback is not exempt by itself (httpx, requests)
    ({"http_proxy": "proxy.example:3128"}, True),  # lower case, and no scheme: http:// as httpx assumes
    ({"ALL_PROXY": "http://proxy.example:3128"}, True),
    ({"HTTPS_PROXY": "http://proxy.example:3128"}, False),  # applies to https:// only
    ({"HTTP_PROXY": "http://proxy.example:3128", "NO_PROXY": "127.0.0.1"}, False),
    ({"HTTP_PROXY": "http://proxy.example:3128", "no_proxy": "localhost, 127.0.0.1"}, False),
    ({"HTTP_PROXY": "http://proxy.example:3128", "NO_PROXY": "*"}, False),
    ({"HTTP_PROXY": "http://proxy.example:3128", "NO_PROXY": "localhost"}, True),  # names, not addresses
])
def test_a_proxy_applies_to_loopback_unless_no_proxy_covers_it(monkeypatch, env, proxied):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    choice = choose("http://127.0.0.1:8000/v1")
    assert choice.name == ("httpx" if proxied else "fast")
    assert choice.proxy == ("http://proxy.example:3128" if proxied else None)


def test_an_https_gateway_takes_https_proxy_and_not_http_proxy(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy.example:3129")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    choice = choose("https://api.example.com/v1")
    assert (choice.name, choice.proxy) == ("httpx", "http://secure-proxy.example:3129")
    monkeypatch.setenv("NO_PROXY", ".example.com")
    assert choose("https://api.example.com/v1").proxy is None


def test_the_proxy_is_shown_without_its_credentials(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://alice:s3cret-pw@proxy.example:3128")
    gw = gwlab.AsyncGateway("http://gw.example/v1", CANARY_KEY)
    shown = repr(gw) + str(gw.http_transport) + repr(gw.http_transport)
    assert "via proxy http://proxy.example:3128" in repr(gw)
    assert "s3cret-pw" not in shown and "alice" not in shown and CANARY_KEY not in shown


@pytest.mark.parametrize(("asked", "url", "name"), [("fast", "http://gw.example/v1", "fast"),
                                                    ("httpx", "http://127.0.0.1:8000/v1", "httpx"),
                                                    ("auto", "http://127.0.0.1:8000/v1", "fast")])
def test_an_explicit_choice_wins_over_the_rule(asked, url, name):
    with gwlab.Gateway(url, CANARY_KEY, http_transport=asked) as gw:
        assert gw.http_transport.name == name


@pytest.mark.parametrize(("asked", "url"), [("turbo", "http://127.0.0.1/v1"), ("fast", "https://127.0.0.1/v1"),
                                            (42, "http://127.0.0.1/v1")])
def test_an_impossible_transport_is_refused_naming_the_field(asked, url):
    with pytest.raises(errors.InvalidRequest) as info:
        gwlab.AsyncGateway(url, CANARY_KEY, http_transport=asked)
    assert info.value.field == "http_transport"


def test_the_embedded_gateway_is_reached_directly_whatever_the_proxy(monkeypatch, capsys):
    import gwlab.local

    monkeypatch.setattr(gwlab.local, "start", lambda *a, **k: FakeLocal())
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    gw = gwlab.connect(env={})
    try:
        assert gw.http_transport.name == "fast" and gw.http_transport.proxy is None
    finally:
        gw.close()
    assert choose(gw.base_url).name == "httpx"  # the same address given by a user follows the rule


# --- a real proxy ----------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    target: str
    headers: list[bytes]


class RecordingProxy:
    """A forward HTTP proxy on its own thread: logs each request head, resolves names from `hosts`."""

    def __init__(self, hosts: dict[str, str]) -> None:
        self.hosts = hosts
        self.log: list[Seen] = []
        self.raw: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        if not started.wait(10):
            raise RuntimeError("the proxy did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    def close(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        self.raw.append(head)
        line, *headers = head[:-4].split(b"\r\n")
        method, target, version = line.split(b" ")
        self.log.append(Seen(method.decode(), target.decode(), headers))
        url = urlsplit(target.decode())  # a proxy is sent the absolute form: http://host:port/path
        upstream_reader, upstream = await asyncio.open_connection(self.hosts.get(url.hostname, url.hostname),
                                                                  url.port or 80)
        kept = [h for h in headers if h.split(b":")[0].strip().lower() not in (b"connection", b"proxy-connection")]
        path = (url.path + (f"?{url.query}" if url.query else "")).encode()
        # one request per connection: the origin closes after answering, and so does the proxy
        upstream.write(b"%s %s %s\r\n%s\r\nconnection: close\r\n\r\n" % (method, path, version, b"\r\n".join(kept)))
        to_origin = asyncio.ensure_future(_pipe(reader, upstream))
        await _pipe(upstream_reader, writer)
        to_origin.cancel()
        upstream.close()
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    running = RecordingProxy({"gateway.test": "127.0.0.1"})
    yield running
    running.close()


@pytest.fixture
def unresolvable(monkeypatch: pytest.MonkeyPatch) -> None:
    """gateway.test resolves nowhere in this process: only the proxy knows it."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host in ("gateway.test", b"gateway.test"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def proxied_url(gateway) -> str:
    return gateway.base_url.replace("127.0.0.1", "gateway.test")


@pytest.mark.usefixtures("unresolvable")
def test_http_proxy_carries_the_requests_and_sees_the_key_only_in_authorization(gateway, proxy, monkeypatch,
                                                                                  caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with gwlab.Gateway(proxied_url(gateway), gateway.api_key) as gw:
        assert (gw.http_transport.name, gw.http_transport.proxy) == ("httpx", proxy.url)
        assert TEXT in gw.models()
        stream = gw.chat.stream("Q: What is the capital of France?\nA:", model=TEXT, max_completion_tokens=4,
                                temperature=0)
        events = list(stream)  # the SSE events came through the proxy as they were sent, up to [DONE]
        assert events and stream.status == "completed" and stream.ending in ("complete", "capped")
        shown = repr(gw) + str(gw.http_transport) + caplog.text + gw.usage.to_csv()
    port = gateway.base_url.split(":")[2].split("/")[0]
    assert [(s.method, s.target) for s in proxy.log] == [
        ("GET", f"http://gateway.test:{port}/v1/models"), ("POST", f"http://gateway.test:{port}/v1/chat/completions")]
    key = gateway.api_key.encode()
    authorization = limits.AUTHORIZATION_HEADER.encode() + b": Bearer " + key
    for head in proxy.raw:  # the key went through the proxy as it must, in the Authorization header only
        assert [h for h in head.split(b"\r\n") if key in h] == [authorization]
    assert gateway.api_key not in shown


@pytest.mark.usefixtures("unresolvable")
def test_no_proxy_covering_the_host_keeps_the_proxy_out(gateway, proxy, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "gateway.test")
    with gwlab.Gateway(proxied_url(gateway), gateway.api_key, max_retries=0) as gw:
        assert gw.http_transport.proxy is None
        with pytest.raises(errors.ConnectionFailed, match="could not connect"):
            gw.models()  # straight to a name nobody resolves: the proxy was not asked
    assert proxy.log == []


def test_a_loopback_gateway_goes_through_the_proxy_until_no_proxy_covers_it(gateway, proxy, monkeypatch):
    monkeypatch.setenv("http_proxy", proxy.url)
    with gwlab.Gateway(gateway.base_url, gateway.api_key) as gw:
        assert gw.http_transport.name == "httpx" and TEXT in gw.models()
    assert [s.target for s in proxy.log] == [gateway.base_url + "/models"]
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    with gwlab.Gateway(gateway.base_url, gateway.api_key) as gw:
        assert gw.http_transport.name == "fast" and TEXT in gw.models()
    assert len(proxy.log) == 1


async def test_a_realtime_socket_goes_where_the_http_goes_and_skips_a_proxy_the_http_does_not_use(gateway, proxy,
                                                                                                 monkeypatch):
    """websockets reads HTTP_PROXY by itself: without being told, the realtime socket of a gateway reached
    directly (here by an explicit 'fast'; the embedded gateway connect() starts is the everyday case) would
    try the proxy."""
    monkeypatch.setenv("http_proxy", proxy.url)
    gw = gwlab.AsyncGateway(gateway.base_url, gateway.api_key, http_transport="fast")
    try:
        async with gw.realtime.connect(REALTIME, session={"modalities": ["text"]}) as conn:
            created = await conn.wait_for("session.created", timeout=30)
    finally:
        await gw.aclose()
    assert created.type == "session.created"
    assert proxy.log == []


# --- the choice agrees with where httpx really sends a request ------------------------------------


class _Answering(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in head and (chunk := self.request.recv(4096)):
                head += chunk
                if not head[:1].isalpha():  # a TLS hello, not an HTTP head: hang up at once
                    return
            self.server.heads.append(head)  # type: ignore[attr-defined]
            self.request.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")


class Recorder(socketserver.ThreadingTCPServer):
    """A loopback server that answers 200 to anything and keeps each request head: a proxy or an origin."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answering)
        self.heads: list[bytes] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def recorders() -> Iterator[dict[str, Recorder]]:
    """Proxies A and B, and origins O and P (a direct request lands there, or fails to connect)."""
    running = {name: Recorder() for name in "ABOP"}
    yield running
    for server in running.values():
        server.shutdown()
        server.server_close()


ENVIRONMENTS = [
    {"HTTP_PROXY": "{A}"},
    {"http_proxy": "{A_bare}"},  # no scheme: http:// assumed
    {"ALL_PROXY": "{B}"},
    {"all_proxy": "{B}", "HTTP_PROXY": "{A}"},  # the scheme's own proxy before all://
    {"HTTPS_PROXY": "{A}"},
    {"HTTPS_PROXY": "{A}", "http_proxy": "{B}"},
    {"HTTP_PROXY": "{A}", "http_proxy": "{B}"},  # both cases set: the standard library picks, as for httpx
    {"HTTP_PROXY": "{A}", "NO_PROXY": "127.0.0.1"},
    {"HTTP_PROXY": "{A}", "no_proxy": "localhost, 127.0.0.1"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "LOCALHOST"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "localhost"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "*"},
    {"ALL_PROXY": "{B}", "NO_PROXY": "gateway.example, *"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "127.0.0.1:{O}"},  # one port only
    {"HTTP_PROXY": "{A}", "NO_PROXY": "::1"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "127.0.0.0/8"},  # httpx reads no CIDR: only the address itself
    {"HTTP_PROXY": "{A}", "NO_PROXY": "http://127.0.0.2"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": "gateway.test"},
    {"HTTP_PROXY": "{A}", "NO_PROXY": ".test"},  # subdomains only
    {"HTTP_PROXY": "{A}", "NO_PROXY": "test"},  # a name and its subdomains
    {"HTTP_PROXY": "{A}", "NO_PROXY": "*.test"},
    {"all_proxy": "{B}", "NO_PROXY": "127.0.0.1:{P}, localhost:{O}"},
]
URLS = ["http://127.0.0.1:{O}/v1", "http://127.0.0.1:{P}/v1", "http://127.0.0.2:{O}/v1", "http://localhost:{O}/v1",
        "http://[::1]:{O}/v1", "http://gateway.test:{O}/v1", "https://127.0.0.1:{O}/v1"]


def _routed_by_httpx(client: httpx.Client, url: str, recorders: dict[str, Recorder]) -> str | None:
    """Which proxy `client` (trust_env=True) sent `url` to (its URL), or None: it went directly."""
    before = {name: len(recorders[name].heads) for name in "AB"}
    with contextlib.suppress(httpx.HTTPError):
        client.get(url)
    used = [recorders[name].url for name in "AB" if len(recorders[name].heads) > before[name]]
    assert len(used) <= 1
    return used[0] if used else None


@pytest.mark.usefixtures("unresolvable")
@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: " ".join(f"{k}={v}" for k, v in env.items()))
def test_the_choice_and_httpx_routing_agree_for_every_proxy_environment(env, recorders, monkeypatch):
    values = {name: server.url for name, server in recorders.items()}
    values |= {"A_bare": values["A"].removeprefix("http://")} | {
        name: str(server.server_address[1]) for name, server in recorders.items() if name in "OP"}
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(**values))
    with httpx.Client(trust_env=True, timeout=10) as client:  # reads the environment now, as a gateway's does
        routes = {url: _routed_by_httpx(client, url, recorders) for url in (t.format(**values) for t in URLS)}
    for url, routed in routes.items():
        choice = choose(url)
        assert choice.proxy == routed, url
        if choice.name == "fast":
            assert routed is None, url  # the fast path is taken only where httpx would go directly too
        assert (choice.name == "fast") == (routed is None and url.startswith("http://")
                                           and not url.startswith("http://gateway.test")), url


def test_gwlab_imports_and_chooses_when_httpx_moves_its_private_proxy_helpers():
    """A minor httpx release may rename `httpx._utils`' helpers: gwlab must not depend on them."""
    script = ("import httpx._utils as private\n"
              "for name in ('get_environment_proxies', 'URLPattern', 'is_ipv4_hostname', 'is_ipv6_hostname'):\n"
              "    delattr(private, name)\n"
              "import gwlab\n"
              "from gwlab.client.transport.choice import choose\n"
              "print(choose('http://127.0.0.1:8000/v1').name)\n")
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "fast"), done.stderr
