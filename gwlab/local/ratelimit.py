"""Per-key token buckets: requests per minute, and model tokens per minute; each off unless configured.

The request bucket takes one request when it is let in. The token bucket cannot know a request's cost
before it runs, so it lets a request in while the key has any budget left and charges the tokens used
(prompt plus generated, `spend`) once the answer is known: a large answer may overdraw the budget, and
the key's next requests wait until it refills (OpenAI's token limit works the same way)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from gwlab.local.errors import APIError


@dataclass(slots=True)
class _Buckets:
    """One refilling bucket per key: `per_minute` units, refilled continuously."""

    per_minute: int
    _levels: dict[int, tuple[float, float]] = field(default_factory=dict)  # key_id -> (level, stamp)

    def level(self, key_id: int, now: float) -> float:
        level, stamp = self._levels.get(key_id, (float(self.per_minute), now))
        return min(float(self.per_minute), level + (now - stamp) * self.per_minute / 60.0)

    def set(self, key_id: int, level: float, now: float) -> None:
        self._levels[key_id] = (level, now)

    def wait(self, level: float, need: float) -> float:
        return max(need - level, 0.0) * 60.0 / self.per_minute


@dataclass(slots=True)
class RateLimiter:
    rpm: int | None
    tpm: int | None = None
    _requests: _Buckets | None = field(init=False, default=None)
    _tokens: _Buckets | None = field(init=False, default=None)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._requests = _Buckets(self.rpm) if self.rpm else None
        self._tokens = _Buckets(self.tpm) if self.tpm else None

    def acquire(self, key_id: int) -> dict[str, str]:
        """Take one request from the key's bucket if its token budget is not spent; the headers describe
        what is left, or 429 saying which limit and for how long."""
        headers: dict[str, str] = {}
        with self._lock:
            now = time.monotonic()
            if self._tokens is not None:
                level = self._tokens.level(key_id, now)
                if level < 1.0:
                    raise _refusal("tokens", self._tokens.wait(level, 1.0), {
                        **_headers("tokens", self.tpm, 0, self._tokens.wait(level, float(self.tpm or 0)))})
                headers.update(_headers("tokens", self.tpm, int(level), self._tokens.wait(level, float(self.tpm or 0))))
            if self._requests is not None:
                level = self._requests.level(key_id, now)
                if level < 1.0:
                    self._requests.set(key_id, level, now)
                    raise _refusal("requests", self._requests.wait(level, 1.0), {
                        **headers, **_headers("requests", self.rpm, 0, self._requests.wait(level, 1.0))})
                level -= 1.0
                self._requests.set(key_id, level, now)
                headers.update(_headers("requests", self.rpm, int(level),
                                        self._requests.wait(level, float(self.rpm or 0))))
        return headers

    def spend(self, key_id: int, tokens: int) -> None:
        """Charge the tokens a request used to its key's budget (may go below zero)."""
        if self._tokens is None or tokens <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens.set(key_id, self._tokens.level(key_id, now) - tokens, now)


def _headers(unit: str, limit: int | None, remaining: int, reset_s: float) -> dict[str, str]:
    return {f"x-ratelimit-limit-{unit}": str(limit), f"x-ratelimit-remaining-{unit}": str(max(remaining, 0)),
            f"x-ratelimit-reset-{unit}": f"{max(reset_s, 0):.3f}s"}


def _refusal(unit: str, wait: float, headers: dict[str, str]) -> APIError:
    return APIError(429, f"Rate limit reached for {unit}: retry after the delay given", code="rate_limit_exceeded",
                    type=unit, headers={**headers, "retry-after": str(math.ceil(wait)),
                                        "retry-after-ms": str(math.ceil(wait * 1000))})
