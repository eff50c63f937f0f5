"""Which HTTP transport reaches a gateway: the hand-written fast path only where it pays.

- `"fast"` (`client/_http11.py`) for a plain `http://` gateway on a loopback host (127.0.0.0/8, ::1,
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
- `http_transport="fast" | "httpx" | "auto"` overrides the choice; an httpx transport object is used
  as given (tests inject faults that way). `gw.http_transport` says what was chosen and why.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx

# httpx's own trust_env rule, asked rather than copied, so the choice and the routing cannot disagree
from httpx._utils import URLPattern, get_environment_proxies

from gwlab import errors
from gwlab.client._http11 import FastTransport

__all__ = ["NAMES", "TransportChoice", "choose", "is_loopback", "proxy_for", "transport_for"]

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


def proxy_for(url: httpx.URL) -> str | None:
    """The proxy httpx with `trust_env=True` would send `url` through (scheme://host:port), or None."""
    mounts = sorted(((URLPattern(key), proxy) for key, proxy in get_environment_proxies().items()),
                    key=lambda mount: mount[0])  # most specific first, as httpx orders its mounts
    for pattern, proxy in mounts:
        if pattern.matches(url):
            if proxy is None:  # NO_PROXY covers it
                return None
            shown = httpx.URL(proxy)
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
