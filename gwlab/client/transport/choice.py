"""Which HTTP transport reaches a gateway: the hand-written fast path only where it pays.

- `"fast"` (`client/transport/http11.py`) for a plain `http://` gateway on a loopback host (127.0.0.0/8, ::1,
  `localhost`) that no proxy setting applies to: there a local model answers in milliseconds and the
  client's CPU is the bound (bench/client_cpu.py).
- `"httpx"` (httpx's own transport, kept by its maintainers) for every other gateway, https
  included, with the environment's proxies honoured exactly as httpx's `trust_env=True` does
  (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY, lower-case too): over a network the network
  dominates, and TLS, certificates and proxies matter more than CPU. httpx-aiohttp was measured and
  rejected (docs/benchmarks.md says why).
- A proxy applies to a loopback host as to any other unless NO_PROXY covers it, as in httpx,
  requests and curl: a user who sets HTTP_PROXY alone may want loopback traffic seen by a debugging
  proxy, and NO_PROXY=localhost,127.0.0.1 is the conventional way out. The one exception is the
  embedded gateway `connect()` starts itself (gwlab/connection.py): it is this process's own server.
- httpx's trust_env rule is re-stated here (`environment_proxies`), since httpx exposes it only through
  a private module that a minor release may move: the environment is read by the same standard-library
  call httpx makes (`urllib.request.getproxies`), and NO_PROXY entries, mount order and host patterns
  follow httpx 0.28 exactly. tests/client/transport/test_transport_choice.py compares the choice with where
  httpx really sends a request over a table of environments, so a change in httpx shows there.
- `http_transport="fast" | "httpx" | "auto"` overrides the choice; an httpx transport object is used
  as given (tests inject faults that way). `gw.http_transport` says what was chosen and why.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.request import getproxies

import httpx

from gwlab import errors
from gwlab.client.transport.http11 import FastTransport

__all__ = ["NAMES", "Mount", "TransportChoice", "choose", "environment_proxies", "is_loopback", "proxy_for",
           "transport_for"]

NAMES = ("auto", "fast", "httpx")


@dataclass(frozen=True, slots=True)
class TransportChoice:
    """How a client reaches its gateway, and why: `name` is "fast", "httpx" or "custom"."""

    name: str
    reason: str
    proxy: str | None = None  # the proxy's scheme://host:port; credentials never kept

    def __str__(self) -> str:
        via = f" via proxy {self.proxy}" if self.proxy else ""
        return f"{self.name}{via} ({self.reason})"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost`: a host that can only be this machine."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Mount:
    """One of httpx's trust_env mounts: URLs matching `pattern` go through `proxy` (None: directly)."""

    pattern: str  # "http://", "all://", "all://*example.com", "all://127.0.0.1", "http://host:8000", ...
    proxy: str | None

    def matches(self, url: httpx.URL) -> bool:
        """httpx's URLPattern.matches: scheme ("all" = any), host (`*.d` under d, `*d` d and under), port."""
        want = httpx.URL(self.pattern)
        if want.scheme != "all" and want.scheme != url.scheme:
            return False
        if want.port is not None and want.port != url.port:
            return False
        host = "" if want.host == "*" else want.host
        if host.startswith("*."):
            return url.host.endswith(host[1:]) and len(url.host) > len(host) - 1
        if host.startswith("*"):
            return url.host == host[1:] or url.host.endswith("." + host[1:])
        return not host or url.host == host

    def priority(self) -> tuple[int, int, int]:
        """httpx's order, most specific first: a port, then the longer host, then a named scheme."""
        want = httpx.URL(self.pattern)
        host = "" if want.host == "*" else want.host
        return (0 if want.port is not None else 1, -len(host), 0 if want.scheme == "all" else -len(want.scheme))


def environment_proxies() -> list[Mount]:
    """The mounts httpx builds with `trust_env=True`, most specific first (NO_PROXY as httpx reads it:
    `*` anywhere turns every proxy off; an address, `localhost` or a `scheme://` entry is exact; any
    other name covers itself and its subdomains, `.name` its subdomains only)."""
    found = getproxies()  # what httpx reads: the environment (plus the system settings on macOS/Windows)
    # a dict, as in httpx: a pattern given twice keeps its first place and its last proxy
    mounts: dict[str, str | None] = {f"{scheme}://": url if "://" in url else f"http://{url}"
                                     for scheme in ("http", "https", "all") if (url := found.get(scheme))}
    for entry in (entry.strip() for entry in found.get("no", "").split(",")):
        if entry == "*":
            return []
        if entry:
            mounts[_no_proxy_pattern(entry)] = None
    # a stable sort: ties keep httpx's insertion order
    return sorted((Mount(pattern, proxy) for pattern, proxy in mounts.items()), key=Mount.priority)


def _no_proxy_pattern(entry: str) -> str:
    if "://" in entry:
        return entry
    if _is_address(entry, ipaddress.IPv4Address) or entry.lower() == "localhost":
        return f"all://{entry}"
    if _is_address(entry, ipaddress.IPv6Address):
        return f"all://[{entry}]"
    return f"all://*{entry}"


def _is_address(entry: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        kind(entry.split("/")[0])
    except ValueError:
        return False
    return True


def proxy_for(url: httpx.URL) -> str | None:
    """The proxy httpx with `trust_env=True` would send `url` through (scheme://host:port), or None."""
    for mount in environment_proxies():
        if mount.matches(url):
            if mount.proxy is None:  # NO_PROXY covers it
                return None
            shown = httpx.URL(mount.proxy)
            return f"{shown.scheme}://{shown.host}" + (f":{shown.port}" if shown.port else "")
    return None


def choose(base_url: str, requested: str | httpx.AsyncBaseTransport | None = None) -> TransportChoice:
    """The transport for `base_url`: the rule of the module docstring, or what the caller asked for."""
    if isinstance(requested, httpx.AsyncBaseTransport):
        return TransportChoice("custom", f"given: {type(requested).__name__}")
    if requested is None:
        requested = "auto"
    if requested not in NAMES:
        raise errors.InvalidRequest("http_transport", f"one of {', '.join(map(repr, NAMES))} or an httpx "
                                                      f"AsyncBaseTransport; got {requested!r}")
    url = httpx.URL(base_url)
    proxy = proxy_for(url)
    if requested == "fast":
        if url.scheme != "http":
            raise errors.InvalidRequest("http_transport", f"'fast' speaks plain http:// only; {url.scheme}:// "
                                                          f"needs 'httpx' (or 'auto', which picks it)")
        unused = f"; the proxy {proxy} is not used" if proxy else ""
        return TransportChoice("fast", f"http_transport='fast'{unused}")
    if requested == "httpx":
        return TransportChoice("httpx", "http_transport='httpx'", proxy)
    if url.scheme != "http":
        return TransportChoice("httpx", f"{url.scheme}:// gateway", proxy)
    if not is_loopback(url.host):
        return TransportChoice("httpx", f"{url.host} is not a loopback host", proxy)
    if proxy is not None:
        return TransportChoice("httpx", f"loopback host, but NO_PROXY does not cover {url.host}", proxy)
    return TransportChoice("fast", "loopback host, no proxy applies")


def transport_for(choice: TransportChoice,
                  requested: str | httpx.AsyncBaseTransport | None) -> httpx.AsyncBaseTransport | None:
    """The transport to give httpx.AsyncClient; None lets httpx build its own, with the env's proxies."""
    if isinstance(requested, httpx.AsyncBaseTransport):
        return requested
    return FastTransport() if choice.name == "fast" else None
