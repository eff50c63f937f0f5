"""Runs inside the LOTUS venv (bench/lotus_side_by_side.py makes it): LOTUS' operators against a gateway.

Reads the gateway address and key from the environment (never the command line), the task from argv as
JSON, and prints one JSON line: per operator its predictions, wall time, LOTUS' own token counts.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pandas as pd


def main() -> None:
    task = json.loads(sys.argv[1])
    import lotus
    from lotus.models import LM
    from lotus.types import CascadeArgs

    url, key = os.environ["GWLAB_BENCH_URL"], os.environ["GWLAB_BENCH_KEY"]
    lm = LM(model=f"openai/{task['model']}", api_base=url, api_key=key, max_tokens=task["max_tokens"],
            max_batch_size=task["concurrency"])
    lotus.settings.configure(lm=lm, helper_lm=lm, enable_cache=False)
    frame = pd.DataFrame({"text": task["texts"]})
    out: dict[str, object] = {}

    started = time.perf_counter()
    try:
        kept = frame.sem_filter(task["instruction"], return_all=True)
        out["sem_filter"] = {"pred": [bool(v) for v in kept[_label(frame, kept)]],
                             "seconds": time.perf_counter() - started, "usage": _usage(lm)}
    except Exception as exc:  # a failed operator is a result: its message is reported, not hidden
        out["sem_filter"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}

    lm.reset_stats() if hasattr(lm, "reset_stats") else None
    started = time.perf_counter()
    try:
        args = CascadeArgs(recall_target=task["target"], precision_target=task["target"],
                           sampling_percentage=0.5, failure_probability=0.2)
        kept, stats = frame.sem_filter(task["instruction"], cascade_args=args, return_all=True, return_stats=True)
        out["sem_filter_cascade"] = {"pred": [bool(v) for v in kept[_label(frame, kept)]],
                                     "seconds": time.perf_counter() - started, "usage": _usage(lm),
                                     "stats": {k: v for k, v in stats.items() if isinstance(v, int | float)}}
    except Exception as exc:
        out["sem_filter_cascade"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps(out))


def _label(frame: pd.DataFrame, kept: pd.DataFrame) -> str:
    """The column sem_filter added with its verdict (its name varies between LOTUS versions)."""
    return next(c for c in kept.columns if c not in frame.columns and not c.startswith(("explanation", "raw_output")))


def _usage(lm: object) -> dict[str, int]:
    usage = lm.stats.physical_usage  # type: ignore[attr-defined]
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}


if __name__ == "__main__":
    main()
