"""The retry rule (spec, Errors; protocols.md §5), decided once for every family and written once, in
`RetryPolicy` (pure: the transport asks it between attempts, and so does the frames runner between its
single-attempt sends, with `request(..., retries=0)`):

- Retried: GET, HEAD, OPTIONS, PUT and DELETE (idempotent by HTTP), and POSTs whose family marks
  them idempotent: chat, responses, messages and decisions. Their only side effect is billing (a
  stored response is a harmless duplicate), so a lost answer is worth a limited, paid resend, as
  the official SDKs do. Any other POST -- task creation above all, realtime sessions too -- is sent
  once: spec rule 2 wants "was it accepted?" checked first, which only its family can do.
- The one exception: a connection that never opened (connect refused or timed out, pool timeout)
  carried no byte of the request, so it is retried for every method.
- Statuses 408, 409, 429 and the 5xx of `limits.RETRYABLE_STATUSES`; `x-should-retry` overrides the
  status (true/false); a 429 whose code says the quota is exhausted is never retried.
- At most `max_retries` (2) more attempts. The wait is `retry-after-ms`, else `Retry-After` (seconds
  or an HTTP date); a wait beyond `retry_after_cap` (60 s) is not slept through: the error (for 429,
  RateLimited with `.retry_after`) is raised at once. Without a header: 0.5 s·2^n capped at 8 s,
  minus up to 25 % jitter. No retry may outlive the call's overall `deadline`.
- A 429 refused the request, so nothing was accepted: a caller that resends a non-idempotent request
  itself (task batches, pausing every submission of a run) may resend it, after the same wait
  (`RetryPolicy.refusal_delay`). The transport itself still sends such a POST once.
- A stream is retried only until its status line arrives; once events flow, a cut is reported
  (StreamInterrupted), never silently resent.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from gwlab import errors
from gwlab.client.transport.status import retry_after_seconds
from gwlab.wire import limits

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The retry rule of the module docstring, as a pure function of what happened: every caller that
    retries (this transport, the frames runner between its attempts, task batches after a 429) asks it,
    so the rule exists once."""

    max_retries: int = limits.MAX_RETRIES_DEFAULT
    retry_after_cap: float = limits.RETRY_AFTER_CAP_SECONDS

    def delay(self, error: BaseException, attempt: int, *, idempotent: bool, sent: bool = True) -> float | None:
        """Seconds to wait before retry number `attempt + 1` after `error`, or None: raise it.

        `sent=False` says the connection never opened, so no byte left and any method may be resent."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, errors.StatusError):
            return self._status_delay(error, attempt) if idempotent else None
        if isinstance(error, errors.ConnectionFailed) and not isinstance(error, errors.StreamInterrupted):
            return self.backoff(attempt) if idempotent or not sent else None
        return None

    def refusal_delay(self, error: BaseException, attempt: int) -> float | None:
        """`delay` for a request that a 429 refused: since nothing was accepted, even a non-idempotent one
        (a task submission) may be resent; any other error gives None, so its caller settles it."""
        if not isinstance(error, errors.RateLimited):
            return None
        return self.delay(error, attempt, idempotent=True)

    def _status_delay(self, error: errors.StatusError, attempt: int) -> float | None:
        headers = httpx.Headers(error.headers)
        should = headers.get(limits.SHOULD_RETRY_HEADER, "").strip().lower()
        if should == "false" or (should != "true" and error.status not in limits.RETRYABLE_STATUSES):
            return None
        if error.status == 429 and _quota_exhausted(error):
            return None
        wait = getattr(error, "retry_after", None)  # RateLimited read it when the answer arrived
        wait = wait if wait is not None else retry_after_seconds(headers)
        if wait is not None and wait > self.retry_after_cap:
            return None
        return wait if wait is not None and wait > 0 else self.backoff(attempt)

    @staticmethod
    def backoff(attempt: int) -> float:
        """0.5 s·2^attempt capped at 8 s, minus up to 25 % jitter (read from limits at each call)."""
        base = min(limits.BACKOFF_BASE_SECONDS * 2.0**attempt, limits.BACKOFF_MAX_SECONDS)
        return base * (1.0 - limits.BACKOFF_JITTER * random.random())


def _quota_exhausted(error: errors.StatusError) -> bool:
    if error.code in limits.QUOTA_EXHAUSTED_CODES:
        return True
    kind = error.error.get("type") if isinstance(error.error, Mapping) else None
    return kind in limits.QUOTA_EXHAUSTED_CODES
