"""Runs inside the LOTUS venv (bench/lotus_side_by_side.py makes it): one LOTUS operator against a gateway.

Reads the gateway address and key from the environment (never the command line), the task from argv as
JSON, and prints one JSON line: the operator's answer (filter verdicts, joined id pairs or the chosen
rows), its wall time, or the error it raised — a failed operator is a result, reported, never hidden.
One operator per process, so the caller can read each one's requests from the gateway's log.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import pandas as pd


def main() -> None:
    task = json.loads(sys.argv[1])
    import lotus
    from lotus.models import LM

    url, key = os.environ["GWLAB_BENCH_URL"], os.environ["GWLAB_BENCH_KEY"]
    lm = LM(model=f"openai/{task['model']}", api_base=url, api_key=key, max_tokens=task["max_tokens"],
            max_batch_size=task["concurrency"])
    lotus.settings.configure(lm=lm, helper_lm=lm, enable_cache=False)
    operator = OPERATORS[task["operator"]]
    started = time.perf_counter()
    try:
        out = operator(task)
        out["seconds"] = time.perf_counter() - started
    except Exception as exc:  # a failed operator is a result: its message is reported, not hidden
        out = {"error": f"{type(exc).__name__}: {exc}"[:500], "seconds": time.perf_counter() - started}
    print(json.dumps(out))


def sem_filter(task: dict[str, Any]) -> dict[str, Any]:
    """One chat request per row; the verdict per row, in the rows' order."""
    frame = pd.DataFrame({"text": task["texts"]})
    kept = frame.sem_filter(task["instruction"], return_all=True)
    return {"pred": [bool(v) for v in kept[_label(frame, kept)]]}


def sem_filter_cascade(task: dict[str, Any]) -> dict[str, Any]:
    """The filter with LOTUS' cascade (the helper model's logprobs decide the confident rows)."""
    from lotus.types import CascadeArgs

    frame = pd.DataFrame({"text": task["texts"]})
    args = CascadeArgs(recall_target=task["target"], precision_target=task["target"], sampling_percentage=0.5,
                       failure_probability=0.2)
    kept, stats = frame.sem_filter(task["instruction"], cascade_args=args, return_all=True, return_stats=True)
    return {"pred": [bool(v) for v in kept[_label(frame, kept)]],
            "stats": {k: v for k, v in stats.items() if isinstance(v, int | float)}}


def sem_join(task: dict[str, Any]) -> dict[str, Any]:
    """One chat request per (left, right) pair; the matched pairs as (left id, right id)."""
    left = pd.DataFrame({"text": task["texts"], "left_id": task["left_ids"]})
    right = pd.DataFrame({"description": task["right_texts"], "right_id": task["right_ids"]})
    joined = left.sem_join(right, task["instruction"])
    return {"pairs": [[int(a), str(b)] for a, b in zip(joined["left_id"], joined["right_id"], strict=True)]}


def sem_topk(task: dict[str, Any]) -> dict[str, Any]:
    """LOTUS' default quickselect by pairwise comparisons (its pivots seeded, so a rerun compares the same)."""
    import numpy as np

    np.random.seed(task["seed"])
    frame = pd.DataFrame({"text": task["texts"], "row_id": task["ids"]})
    top, stats = frame.sem_topk(task["instruction"], K=task["k"], return_stats=True)
    return {"chosen": [int(v) for v in top["row_id"]], "stats": {"llm_calls": stats.get("total_llm_calls")}}


def _label(frame: pd.DataFrame, kept: pd.DataFrame) -> str:
    """The column sem_filter added with its verdict (its name varies between LOTUS versions)."""
    return next(c for c in kept.columns if c not in frame.columns and not c.startswith(("explanation", "raw_output")))


OPERATORS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "sem_filter": sem_filter, "sem_filter_cascade": sem_filter_cascade, "sem_join": sem_join, "sem_topk": sem_topk}


if __name__ == "__main__":
    main()
