"""Deadlines on slow connections (issue 30, finding 5): headers here, in the HTTP protocol; bodies in
`guard.py`; idle keep-alive and the concurrency limit are uvicorn's own settings (`server._config`).

A client that opens a connection and sends nothing, or trickles its headers a line at a time, holds a
socket and a parser for as long as it likes: uvicorn only times out idle connections *between* requests.
`with_header_deadline` wraps uvicorn's HTTP protocol class so the headers of each request must arrive
within the deadline of its first byte (or of the connection's start), else the connection is closed."""

from __future__ import annotations

import asyncio
from typing import Any


def protocol_class(kind: str = "auto") -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn would pick for `kind` ("auto": httptools when installed, else h11)."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    if kind == "auto":
        try:
            import httptools  # noqa: F401
        except ImportError:
            kind = "h11"
        else:
            kind = "httptools"
    protocol: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS[kind])
    return protocol


def with_header_deadline(base: type[asyncio.Protocol], seconds: float) -> type[asyncio.Protocol]:
    """`base` with a deadline for each request's headers (uvicorn's protocols keep the request being
    answered in `self.cycle`: a new cycle means a request's headers were complete)."""

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]  # a base known at run time (uvicorn's choice)
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and self._between_requests():
                self._arm()  # the first byte of a request on a kept-alive connection
            super().data_received(data)
            if not self._between_requests() or self.transport.get_protocol() is not self:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or cycle.response_complete

        def _arm(self) -> None:
            cycle = getattr(self, "cycle", None)
            self._header_timer = asyncio.get_running_loop().call_later(seconds, self._expire, cycle)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self, cycle: Any) -> None:
            self._header_timer = None
            if self.transport.get_protocol() is not self:
                return  # upgraded to a WebSocket, whose protocol now owns the connection
            if getattr(self, "cycle", None) is cycle and self._between_requests() and not self.transport.is_closing():
                self.transport.close()  # no request began in time: nothing to answer, nobody waiting

    HeaderDeadline.__name__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline
