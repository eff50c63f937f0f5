"""The embedded local gateway: the spec's API on loopback, served by real local models."""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gwlab.local.server import LocalGateway

__all__ = ["Lease", "LocalGateway", "shared", "start"]


def start(db_path: str | None = None, **options: Any) -> LocalGateway:
    """Start the gateway on a free loopback port in a background thread; returns `.base_url`, `.api_key`."""
    from gwlab.local.server import start as _start  # server deps load only when a gateway is wanted

    return _start(db_path, **options)


@dataclass(eq=False)
class Lease:
    """One holder's use of the process's shared embedded gateway (`shared()`).

    `stop()` lets go of it, once; the server stops when its last lease is let go, or at exit. So
    closing one `Gateway` never stops a server that another `Gateway` of the process still uses.
    """

    base_url: str
    api_key: str = field(repr=False)
    started: bool = False  # True for the lease whose request started the server
    _released: bool = field(default=False, repr=False)

    def stop(self) -> None:
        with _lock:
            if self._released:
                return
            self._released = True
            _Shared.leases -= 1
            server = _Shared.server if _Shared.leases == 0 else None
            if server is not None:
                _Shared.server = None
        if server is not None:
            server.stop()


class _Shared:
    """The one embedded gateway of this process, and how many leases hold it."""

    server: Any = None
    leases = 0


_lock = threading.Lock()


def shared() -> Lease:
    """A lease on the process's one embedded gateway, started on first use (models load once).

    Every `gwlab.connect()` without a configured hosted gateway takes one, so the calls of a kernel
    (connect() twice, the magics, the widgets, `df.gw`) reach one server with one request log,
    instead of each starting its own (issue 18, item 4).
    """
    with _lock:
        started = _Shared.server is None
        if started:
            _Shared.server = start()
            atexit.register(_stop_at_exit, _Shared.server)
        _Shared.leases += 1
        return Lease(_Shared.server.base_url, _Shared.server.api_key, started)


def _stop_at_exit(server: Any) -> None:
    """At interpreter exit, stop the shared server if its leases did not (a kernel that never closed)."""
    with _lock:
        if _Shared.server is server:
            _Shared.server, _Shared.leases = None, 0
        else:
            return  # already stopped by its last lease
    server.stop()
