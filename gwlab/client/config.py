"""How a client reaches one gateway, as one frozen object: built and checked once, read by every layer.

`Gateway(...)`, `AsyncGateway(...)` and `gwlab.connect(...)` take these settings as keyword arguments
(`ClientOptions`), turn them into a `ClientConfig` once, and hand that object down: the sync gateway to
its async twin, the twin to its transport. A new setting is one field here, not one keyword in three
signatures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

import httpx

from gwlab import errors
from gwlab.client.dialect import Dialect
from gwlab.wire import limits

__all__ = ["MESSAGES_AUTH", "ClientConfig", "ClientOptions"]

MESSAGES_AUTH = ("x-api-key", "bearer")  # how the messages family sends the key


class ClientOptions(TypedDict, total=False):
    """The keyword arguments of `Gateway`, `AsyncGateway` and `connect()` (see `ClientConfig`)."""

    timeout: float | None
    connect_timeout: float | None
    deadline: float | None
    max_retries: int
    retry_after_cap: float
    ledger_path: str | os.PathLike[str] | None
    messages_auth: str
    anthropic_version: str
    headers: Mapping[str, str] | None
    http_transport: str | httpx.AsyncBaseTransport | None
    dialect: Dialect | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything but the address and the key (those stay out of any repr).

    timeout, connect_timeout : seconds of silence allowed while reading, and to connect.
    deadline : seconds for a whole call, retries and stream included (None: no limit).
    max_retries, retry_after_cap : the retry policy (`gwlab.client.transport.retry.RetryPolicy`).
    ledger_path : a SQLite file that keeps the request ledger across sessions.
    messages_auth, anthropic_version : the messages family's auth header and version.
    headers : extra headers for every request.
    http_transport : "auto" (None), "fast", "httpx", or an httpx transport object (tests).
    dialect : how this gateway differs from the spec (`gwlab.Dialect` or a mapping).
    """

    timeout: float | None = limits.READ_TIMEOUT_SECONDS
    connect_timeout: float | None = limits.CONNECT_TIMEOUT_SECONDS
    deadline: float | None = None
    max_retries: int = limits.MAX_RETRIES_DEFAULT
    retry_after_cap: float = limits.RETRY_AFTER_CAP_SECONDS
    ledger_path: str | os.PathLike[str] | None = None
    messages_auth: str = MESSAGES_AUTH[0]
    anthropic_version: str = limits.ANTHROPIC_VERSION
    headers: Mapping[str, str] | None = field(default=None, repr=False)  # may carry credentials of their own
    http_transport: str | httpx.AsyncBaseTransport | None = None
    dialect: Dialect | Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.messages_auth not in MESSAGES_AUTH:
            raise errors.InvalidRequest("messages_auth", f"'x-api-key' or 'bearer'; got {self.messages_auth!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise errors.InvalidRequest("max_retries", f"must be a non-negative integer; got {self.max_retries!r}")
        for name in ("timeout", "connect_timeout", "deadline"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise errors.InvalidRequest(name, f"must be a positive number of seconds or None; got {value!r}")

    @classmethod
    def of(cls, config: ClientConfig | None = None, **options: Any) -> ClientConfig:
        """`config` with `options` applied over it; an unknown option is refused, naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        base = config if config is not None else cls()
        return cls(**{**{name: getattr(base, name) for name in known}, **options})
