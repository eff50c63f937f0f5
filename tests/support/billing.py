"""What the gateway billed against what reached the client, for the reliability tests' fault runs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tests.support.fault_proxy import Exchange


@dataclass(frozen=True)
class Billing:
    """Billed requests (status-200 rows of the gateway's request log) grouped by the body that was sent.

    A log row holds no body, so each row is joined, through the `x-request-id` the gateway answered
    with, to the proxy's record of the request: the SHA-256 of the exact bytes the gateway received."""

    per_body: Counter[str]  # body hash -> status-200 rows billed for it
    delivered: Counter[str]  # body hash -> answers the client received whole
    lost: Counter[str]  # body hash -> answers billed but cut (or held) before they reached the client whole
    unmatched: int  # 200 rows without a proxy record (must be 0)
    billed_tokens: int

    @property
    def duplicates(self) -> int:
        """Billed rows beyond the first per distinct body."""
        return sum(n - 1 for n in self.per_body.values() if n > 1)

    @property
    def delivered_twice(self) -> int:
        """Bodies whose answer reached the client more than once (a real duplicate: must be 0)."""
        return sum(1 for n in self.delivered.values() if n > 1)


def billing(log_rows: list[dict[str, Any]], exchanges: list[Exchange]) -> Billing:
    by_id = {e.request_id: e for e in exchanges if e.request_id}
    per_body: Counter[str] = Counter()
    unmatched = tokens = 0
    for row in log_rows:
        if row["status"] != 200:
            continue
        tokens += row["input_tokens"] or 0
        exchange = by_id.get(row["request_id"])
        if exchange is None:
            unmatched += 1
            continue
        per_body[exchange.body_sha] += 1
    delivered = Counter(e.body_sha for e in exchanges if e.status == 200 and e.delivered)
    lost = Counter(e.body_sha for e in exchanges if e.status == 200 and not e.delivered)
    return Billing(per_body, delivered, lost, unmatched, tokens)
