"""Run the local gateway: in the foreground (`gwlab serve`) or on a background thread (`start()`)."""

from __future__ import annotations

import dataclasses
import signal
import socket
import sys
import tempfile
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from gwlab.local import deadlines
from gwlab.local.app import create_app
from gwlab.local.hosts import exposure_warning
from gwlab.local.limits import Limits
from gwlab.local.settings import Settings
from gwlab.local.store import Store


def bind(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """Bind first, so the URL (with a free port when port=0) is known before the server runs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"


def _config(app: Any, limits: Limits) -> uvicorn.Config:
    """uvicorn's settings: the idle keep-alive and concurrency limits, and the header deadline (deadlines.py).

    No access log: the gateway keeps its own request log, which never holds a header or a body."""
    http = deadlines.protocol_class()
    if limits.header_timeout_s is not None:
        http = deadlines.with_header_deadline(http, limits.header_timeout_s)
    keep_alive = limits.keep_alive_s if limits.keep_alive_s is not None else 24 * 3600.0
    return uvicorn.Config(app, log_level="warning", access_log=False, ws=_websocket_protocol(), lifespan="on",
                          http=http, limit_concurrency=limits.max_concurrency,
                          # uvicorn annotates an int, but hands it to loop.call_later, which takes seconds as a float
                          timeout_keep_alive=keep_alive)  # type: ignore[arg-type]


def _websocket_protocol() -> str:
    """websockets' Sans-I/O layer where this uvicorn has it (its legacy layer warns of deprecation)."""
    from uvicorn.config import WS_PROTOCOLS

    return "websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "websockets"


def serve(host: str = "127.0.0.1", port: int = 0, settings: Settings | None = None) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn handles both and shuts down cleanly)."""
    settings = settings or Settings()
    # uvicorn shuts down gracefully on a signal, then re-raises it to the handler it found, which would
    # end the process with status -15 (SIGTERM) or a KeyboardInterrupt: a clean stop should exit 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_cleanly)
    load_gguf(settings)  # before binding: a bad file stops the command with nothing listening
    if warning := exposure_warning(host):
        print(warning, file=sys.stderr, flush=True)
    sock = bind(host, port)
    app = create_app(settings)
    print(base_url(sock), flush=True)  # the first line of stdout, for scripts and tests
    uvicorn.Server(_config(app, settings.limits)).run(sockets=[sock])


def load_gguf(settings: Settings) -> None:
    """Check and load the user's GGUF models (settings, else GWLAB_GGUF) before the gateway starts: a
    missing, non-GGUF or unloadable file raises GgufError naming it, and no server starts."""
    files = settings.resolved_gguf()
    if files:
        from gwlab.local import catalog

        catalog.add_gguf(files)


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


@dataclass
class LocalGateway:
    """A gateway running on a background thread of this process, with a fresh key for its caller."""

    base_url: str
    api_key: str = field(repr=False)
    db_path: str
    _server: uvicorn.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def start(db_path: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
          settings: Settings | None = None, key_name: str | None = None,
          gguf: Mapping[str, str] | None = None) -> LocalGateway:
    """Start the local gateway on a free loopback port; return its URL and a fresh key.

    Without `db_path` the state lives in a new temporary directory, so notebooks and tests never
    share keys or logs by accident. `gguf` ({id: path}) serves the user's GGUF models too; without it,
    those GWLAB_GGUF names."""
    settings = settings or Settings()
    if gguf is not None:
        settings = dataclasses.replace(settings, gguf=tuple(gguf.items()))
    load_gguf(settings)  # first: a bad file raises here, before any key, database or thread exists
    db_path = db_path or str(Path(tempfile.mkdtemp(prefix="gwlab-")) / "gateway.sqlite")
    if not settings.db_path:
        settings = dataclasses.replace(settings, db_path=db_path)
    if warning := exposure_warning(host):
        warnings.warn(warning, stacklevel=2)
    store = Store(db_path)
    api_key = store.create_key(key_name or f"session-{threading.get_ident():x}-{id(store):x}")
    sock = bind(host, port)
    server = uvicorn.Server(_config(create_app(settings, store), settings.limits))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="gwlab-local", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the local gateway failed to start; see the log above")
        threading.Event().wait(0.01)
    return LocalGateway(base_url(sock), api_key, db_path, server, thread)
