"""A run to kill: 60 distinct decisions, paced, checkpointed (driven by test_resume.py in a subprocess)."""

from __future__ import annotations

import os
import signal
import sys

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway
from gwlab.frames.run.limiter import TokenBucket

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "criteria": {"billing": "payments and invoices", "tech": "bugs"}}}


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"ticket": [f"Ticket {i}: checkout fails with error {i * 7}" for i in range(rows)]})


def main() -> None:
    # Ctrl-C raises KeyboardInterrupt, as in a terminal or a kernel, even when this process was started from
    # a background job, which inherits SIGINT ignored (a CI runner's `cmd &`: the run then ignored the test)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    checkpoint, rows, rpm = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with Gateway(os.environ["GWLAB_BASE_URL"], os.environ["GWLAB_API_KEY"]) as gw:
        # paced from the first row (the default burst of 10 s of quota would send all 60 rows at once, and a
        # fast engine could finish them before the test gets to kill the run)
        limiter = TokenBucket(rpm, burst=0.5) if rpm else None
        out = frame(rows).gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=checkpoint, concurrency=4,
                                    limiter=limiter, progress=False)
        print(out.run.text(), flush=True)


if __name__ == "__main__":
    main()
