"""A per-key token bucket: requests per minute, off unless configured."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from gwlab.local.errors import APIError


@dataclass(slots=True)
class RateLimiter:
    rpm: int | None
    _buckets: dict[int, tuple[float, float]] = field(default_factory=dict)  # key_id -> (tokens, stamp)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self, key_id: int) -> dict[str, str]:
        """Take one request from the key's bucket; the headers describe what is left, or 429."""
        if not self.rpm:
            return {}
        rate = self.rpm / 60.0
        with self._lock:
            now = time.monotonic()
            tokens, stamp = self._buckets.get(key_id, (float(self.rpm), now))
            tokens = min(float(self.rpm), tokens + (now - stamp) * rate)
            if tokens < 1.0:
                wait = (1.0 - tokens) / rate
                self._buckets[key_id] = (tokens, now)
                raise APIError(429, "Rate limit reached for requests: retry after the delay given",
                               code="rate_limit_exceeded", type="requests",
                               headers={**self._headers(0, wait), "retry-after": str(math.ceil(wait)),
                                        "retry-after-ms": str(math.ceil(wait * 1000))})
            tokens -= 1.0
            self._buckets[key_id] = (tokens, now)
        return self._headers(int(tokens), (self.rpm - tokens) / rate)

    def _headers(self, remaining: int, reset_s: float) -> dict[str, str]:
        return {"x-ratelimit-limit-requests": str(self.rpm),
                "x-ratelimit-remaining-requests": str(remaining),
                "x-ratelimit-reset-requests": f"{max(reset_s, 0):.3f}s"}
