"""Task batches to kill (driven by test_task_resume.py): image tasks for a prompt table on the embedded
gateway, paced; or three tasks on the described task app of tests/support/task_app.py, the second held mid-answer."""

from __future__ import annotations

import os
import sys

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway
from gwlab.frames.run.limiter import TokenBucket


def frame(tag: str, rows: int) -> pd.DataFrame:
    return pd.DataFrame({"scene": [f"scene {i} of run {tag}" for i in range(rows)]},
                        index=pd.Index([f"r{i}" for i in range(rows)], name="row"))


def run(gw: Gateway, tag: str, rows: int, checkpoint: str, folder: str, rpm: float | None) -> pd.DataFrame:
    # paced from the first row, so the test can kill the run between submissions
    limiter = TokenBucket(rpm, burst=0.5) if rpm else None
    return frame(tag, rows).gw.images("{scene}", size="256x256", gateway=gw, checkpoint=checkpoint, folder=folder,
                                      concurrency=2, limiter=limiter, poll_interval=0.1, timeout=300,
                                      progress=False)


def held(gw: Gateway, checkpoint: str, folder: str) -> pd.DataFrame:
    """Three rows on the test's described task app, one at a time; the second one's answer is held back."""
    from tests.support.task_app import FAMILY

    prompts = pd.DataFrame({"prompt": ["a first sketch", "hold this one", "a third sketch"]})
    return prompts.gw.tasks(FAMILY, "prompt", model="m", gateway=gw, checkpoint=checkpoint, folder=folder,
                            concurrency=1, poll_interval=0.01, progress=False)


def main() -> None:
    checkpoint, folder, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    with Gateway(os.environ["GWLAB_BASE_URL"], os.environ["GWLAB_API_KEY"]) as gw:
        if tag == "held":
            print(held(gw, checkpoint, folder).run.text(), flush=True)
            return
        rows, rpm = int(sys.argv[4]), float(sys.argv[5])
        print(run(gw, tag, rows, checkpoint, folder, rpm).run.text(), flush=True)


if __name__ == "__main__":
    main()
