"""Open realtime sessions per key, capped (Limits.realtime_sessions_per_key): each session holds a
transcriber, a text engine's turns and audio buffers, so one key must not open them by the hundred."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gwlab.local.errors import APIError

TOO_MANY = "too_many_sessions"


@dataclass(slots=True)
class SessionSlots:
    cap: int | None
    _open: Counter[int] = field(default_factory=Counter)  # key id -> sessions open (the event loop's only)

    def take(self, key_id: int) -> None:
        """One more session for the key, or a 429 naming the limit."""
        if self.cap is not None and self._open[key_id] >= self.cap:
            raise APIError(429, f"This key already has {self.cap} realtime sessions open (the gateway's "
                           "limit per key): close one first", code=TOO_MANY, param="realtime_sessions_per_key")
        self._open[key_id] += 1

    def count(self, key_id: int) -> int:
        """Sessions the key has open now."""
        return self._open.get(key_id, 0)

    def give_back(self, key_id: int) -> None:
        self._open[key_id] -= 1
        if self._open[key_id] <= 0:
            del self._open[key_id]
