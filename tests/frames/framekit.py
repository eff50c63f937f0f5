"""Shared by the pandas-layer tests (imported, not a conftest: sibling conftests share one module name)."""

from __future__ import annotations

import pandas as pd
from gatewaykit import RequestLog  # noqa: F401  (for the pandas-layer tests)

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)

DECISIONS = "/v1/decisions"
QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Is this urgent?"},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": {"billing": "payments, invoices and refunds", "tech": "bugs, outages and errors"}},
    "severity": {"type": "score", "criteria": ["minor annoyance", "major problem", "critical outage"]},
}


TICKETS = {
    "ticket": ["The payment page crashes and nobody can check out",
               "Please send me a copy of last month's invoice",
               "I was charged twice for my subscription",
               "Small typo on the pricing page"],
    "customer": ["acme", "globex", "initech", "umbrella"],
}


def tickets_frame() -> pd.DataFrame:
    return pd.DataFrame(TICKETS, index=pd.Index([101, 102, 103, 104], name="ticket_id"))
