"""Which Host names the gateway answers to, and a loud word when it listens beyond loopback.

DNS rebinding: a page on evil.example re-points its name at 127.0.0.1, and the browser then talks to the
gateway as evil.example, same-origin. Checking the Host header against the address the connection
arrived on refuses that: an address literal or `localhost` (on a loopback connection) passes, another
name only when the operator allowed it (`gwlab serve --allow-host NAME`, `Settings.allowed_hosts`; `*`
turns the check off, for a reverse proxy that rewrites Host)."""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from gwlab.local.errors import APIError, error_response

ANY_HOST = "*"


class HostCheck:
    """Pure ASGI, outermost: a request whose Host names no address of this gateway gets a 400 (HTTP) or
    a refused handshake (WebSocket) before any other code runs."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...] = ()) -> None:
        self.app, self.allowed = app, frozenset(h.strip().lower().rstrip(".") for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        host = _header(scope, b"host")
        if scope["type"] not in ("http", "websocket") or host is None or ANY_HOST in self.allowed \
                or host_allowed(host, scope.get("server"), self.allowed):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accepting: uvicorn answers 403
            return
        error = APIError(400, f"The Host header {host[:100]!r} names no address of this gateway (a page "
                         "re-pointing its own name at it, DNS rebinding, is refused); to serve it under that "
                         "name start it with `gwlab serve --allow-host NAME`", code="invalid_host", param="Host")
        await error_response(scope["path"], error, None)(scope, receive, send)


def host_allowed(host: str, server: tuple[str, int] | list[Any] | None, allowed: frozenset[str]) -> bool:
    """`host` (a Host header value) against the local address the connection arrived on."""
    name = _hostname(host)
    if name in allowed:
        return True
    local = str(server[0]).lower() if server else ""
    if name == local:
        return True
    local_ip, ip = _ip(local), _ip(name)
    if ip is not None and local_ip is not None and ip == local_ip:
        return True
    on_loopback = local_ip is not None and local_ip.is_loopback
    # 0.0.0.0 and :: reach loopback on Linux and macOS: the URL `gwlab serve --host 0.0.0.0` prints
    return on_loopback and (name == "localhost" or (ip is not None and (ip.is_loopback or ip.is_unspecified)))


def is_loopback(host: str) -> bool:
    ip = _ip(host.strip("[]"))
    return host.lower() == "localhost" or (ip is not None and ip.is_loopback)


def exposure_warning(host: str) -> str | None:
    """What `gwlab serve` prints (and `gwlab.local.start` warns) when binding beyond loopback."""
    if is_loopback(host):
        return None
    return (f"WARNING: the gateway listens on {host}, beyond this machine's loopback. It speaks plain HTTP: "
            "every key and every prompt crosses the network in clear, and anyone who can reach the port may "
            "try keys or send heavy requests. Put it behind a TLS reverse proxy on a network you trust, or "
            "bind 127.0.0.1 (the default). Requests must name this machine by an address or by a name given "
            "with --allow-host.")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[1:].partition("]")[0]
    name, sep, port = host.rpartition(":")
    return (name if sep and port.isdigit() and ":" not in name else host).rstrip(".")


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            text: str = value.decode("latin-1")  # an ASGI header value is bytes
            return text
    return None
