"""What one caller may take from the gateway: caps on a request's work, on realtime, and on connections.

One options object (`Settings.limits`) so `gwlab serve`, `start()` and the tests set them in one place;
docs/security.md gives each limit, its default and its flag. A field set to None is off."""

from __future__ import annotations

from dataclasses import dataclass, fields

from gwlab.errors import InvalidRequest

# OpenAI refuses more than 128 tools in one request; every tool is described to the routing model, so
# thousands of them cost seconds each (issue 30: 3,000 tools and max_tokens 1 took 40 s)
MAX_TOOLS_DEFAULT = 128


@dataclass(frozen=True, slots=True)
class Limits:
    # per request: tools, and generated tokens over all choices (n x max_tokens, or the default cap)
    max_tools: int = MAX_TOOLS_DEFAULT
    max_request_tokens: int = 4096
    # per key: generated plus prompt tokens per minute (None: off), beside Settings.rate_limit_rpm
    tokens_per_minute: int | None = None
    # realtime: uncommitted input audio (pcm16 24 kHz; 10 MiB is about 3.6 minutes) and open sessions per key
    realtime_buffer_bytes: int = 10 * 1024 * 1024
    realtime_sessions_per_key: int = 8
    # connections: seconds to send a request's headers, and its body; idle keep-alive seconds; and the
    # number of connections and tasks served at once (uvicorn's limit_concurrency: a 503 beyond it). 1024,
    # not 256: idle keep-alive connections count too, so 200 busy clients beside a notebook's pooled ones
    # met 503s at 256 (CI, test_load.py); 1024 still stops a flood well below the open-file limit
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    keep_alive_s: float = 30.0
    max_concurrency: int | None = 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not value > 0:
                raise InvalidRequest(f"limits.{f.name}", f"must be positive, got {value!r}")


# `gwlab serve` flags, one per limit: --max-tools, --tokens-per-minute, --header-timeout-s, ...
FLAGS = {f.name: "--" + f.name.replace("_", "-") for f in fields(Limits)}
