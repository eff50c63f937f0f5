"""Tickets and the questions asked of them: the frames the pandas-layer and reliability tests run."""

from __future__ import annotations

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)

DECISIONS = "/v1/decisions"
QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Is this urgent?"},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": {"billing": "payments, invoices and refunds", "tech": "bugs, outages and errors"}},
    "severity": {"type": "score", "criteria": ["minor annoyance", "major problem", "critical outage"]},
}
# two questions, for runs of many rows
SHORT_QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
                   "team": {"type": "choice", "instructions": "Which team should handle it?",
                            "criteria": {"billing": "payments, invoices and refunds", "tech": "bugs and errors"}}}

TICKETS = {
    "ticket": ["The payment page crashes and nobody can check out",
               "Please send me a copy of last month's invoice",
               "I was charged twice for my subscription",
               "Small typo on the pricing page"],
    "customer": ["acme", "globex", "initech", "umbrella"],
}


def tickets_frame() -> pd.DataFrame:
    return pd.DataFrame(TICKETS, index=pd.Index([101, 102, 103, 104], name="ticket_id"))


def tickets(rows: int, tag: str = "") -> pd.DataFrame:
    """`rows` distinct tickets (distinct bodies, so each row is its own request)."""
    return pd.DataFrame({"ticket": [f"{tag}Ticket {i}: checkout fails with error {i * 7}" for i in range(rows)]})
