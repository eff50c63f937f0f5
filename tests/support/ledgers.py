"""A client's usage ledger filled by real calls: a models listing and one call to each of two models."""

from __future__ import annotations

from typing import Any

from gwlab import Gateway
from tests.support.models import DECIDE_MODEL, TEXT_MODEL

URGENT = {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}


def live_ledger(gateway: Any) -> Any:
    """`gw.usage` after GET /models, a decision of DECIDE_MODEL and a one-token chat of TEXT_MODEL."""
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        gw.models()
        gw.decide("The site is down", URGENT, model=DECIDE_MODEL)
        gw.chat("Q: What is 2 + 2?\nA:", model=TEXT_MODEL, max_completion_tokens=1, temperature=0)
        return gw.usage
