"""A run to kill: 60 distinct decisions, paced, checkpointed (driven by test_resume.py in a subprocess)."""

from __future__ import annotations

import os
import sys

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "criteria": {"billing": "payments and invoices", "tech": "bugs"}}}


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"ticket": [f"Ticket {i}: checkout fails with error {i * 7}" for i in range(rows)]})


def main() -> None:
    checkpoint, rows, rpm = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with Gateway(os.environ["GWLAB_BASE_URL"], os.environ["GWLAB_API_KEY"]) as gw:
        out = frame(rows).gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=checkpoint, concurrency=4,
                                    requests_per_minute=rpm or None, progress=False)
        print(out.run.text(), flush=True)


if __name__ == "__main__":
    main()
