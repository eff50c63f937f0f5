"""gwlab's operators beside LOTUS' on the same rows of the 312 labelled support messages, keyless.

    .venv/bin/python bench/lotus_side_by_side.py [--rows 60] [--join-rows 20] [--topk-rows 40] [--k 5]
        [--only filter join topk]

Sets up LOTUS in its own venv (`.venv-lotus`: lotus-ai with the CPU torch wheel, never a CUDA build;
not part of `make test`), starts the embedded gateway, and runs each pair of operators on the same rows:
  - filter ("does the customer ask for a refund?", the first --rows messages): LOTUS' `sem_filter` (one chat
    request per row) and its filter cascade, against gwlab's `df.gw.filter` (one decision per row) and
    `df.gw.decide` with a cascade whose oracle is the label column (LOTUS' cascade here uses the same local
    chat model as helper and oracle: the embedded gateway has one); accuracy against `refund`;
  - join (the first --join-rows messages to the twelve queues of bench/harness/support_tasks.py, the same
    condition): LOTUS' `sem_join` (one chat request per pair) against `df.gw.merge` (one choice question
    per message); accuracy against `team` (a message is right when its matched queues are all, and only,
    its team's; none for "other");
  - top k (the --k most urgent of the first --topk-rows messages, the same criterion): LOTUS' `sem_topk`
    (quickselect by pairwise chat comparisons, pivots seeded) against `df.gw.topk` (a score per row, pairwise
    comparisons near the cut); the share of the k chosen labelled `urgent`, and the overlap of both sides.
Requests and tokens are the gateway's own request log, so both sides are counted the same way. A LOTUS
operator that fails is a row with its error.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from harness.quality import Binary, baselines, majority_share
from harness.support_tasks import (  # bench/harness: this script's folder is on sys.path
    MERGE_CONDITION,
    QUEUES,
    URGENCY,
    URGENCY_LEVELS,
    chosen_truth,
    pair_truth,
    routing_accuracy,
    share_positive,
)

import gwlab
from gwlab import local

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-lotus"
LOTUS = ["torch==2.13.0", "lotus-ai==1.2.4"]  # the CPU wheel pinned first, so lotus-ai never pulls a CUDA one
DATA = ROOT / "notebooks" / "data" / "support_messages.csv"
CONDITION = "The customer asks for a refund"
# LOTUS names the columns it reads inside its instruction; otherwise each side is given the same words
INSTRUCTION = "Does the message {text} ask for a refund?"
JOIN_INSTRUCTION = "The message {text} belongs in this queue: {description}"
TOPK_INSTRUCTION = "How urgent the message {text} is"
TEXT_MODEL = "local/smollm2-135m-instruct"
MAX_TOKENS = 16
SEED = 0


def lotus_python() -> Path:
    python = VENV / "bin" / "python"
    if not (VENV / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *LOTUS], check=True)
        (VENV / ".installed").touch()
    return python


def logged(db: str, mark: int) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT path, COALESCE(input_tokens, 0), COALESCE(output_tokens, 0) FROM request_log "
                            "WHERE id > ?", (mark,)).fetchall()
    return {"requests": len(rows), "input_tokens": sum(r[1] for r in rows), "output_tokens": sum(r[2] for r in rows)}


def mark_of(db: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COALESCE(MAX(id), 0) FROM request_log").fetchone()[0]


@dataclass(frozen=True)
class Bench:
    """The gateway both sides reach, LOTUS' interpreter and the concurrency both are given."""

    server: Any
    gw: gwlab.Gateway
    python: Path
    concurrency: int

    def lotus(self, operator: str, task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Runs one LOTUS operator in its venv: its output (or error) and the gateway log's counts for it."""
        task = {"operator": operator, "model": TEXT_MODEL, "max_tokens": MAX_TOKENS,
                "concurrency": self.concurrency, **task}
        env = {**os.environ, "GWLAB_BENCH_URL": self.server.base_url, "GWLAB_BENCH_KEY": self.server.api_key,
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
        mark = mark_of(self.server.db_path)
        done = subprocess.run([str(self.python), str(ROOT / "bench" / "lotus" / "worker.py"), json.dumps(task)],
                              env=env, capture_output=True, text=True, check=False)
        lines = done.stdout.strip().splitlines()
        out = json.loads(lines[-1]) if done.returncode == 0 and lines else {
            "error": f"worker exited {done.returncode}: {done.stderr.strip()[-500:]}"}
        error = out.get("error")  # a library's message may quote its settings: the key never reaches the table
        return out, {"side": "LOTUS", "operator": operator, **logged(self.server.db_path, mark),
                     "wall_s": out.get("seconds"), "error": error and error.replace(self.server.api_key, "[key]")}

    def gwlab(self, operator: str, call: Callable[[dict[str, Any]], Any]) -> tuple[Any, dict[str, Any]]:
        """Runs one gwlab call with the shared options: its result and the gateway log's counts for it."""
        options = {"gateway": self.gw, "checkpoint": None, "progress": False, "concurrency": self.concurrency}
        mark, started = mark_of(self.server.db_path), time.perf_counter()
        out = call(options)
        return out, {"side": "gwlab", "operator": operator, "wall_s": time.perf_counter() - started,
                     **logged(self.server.db_path, mark)}


def filters(bench: Bench, rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The refund condition on both sides, with and without a cascade; accuracy against `refund`."""
    truth = rows["refund"].astype(bool)
    scored = []
    task = {"texts": rows["text"].tolist(), "instruction": INSTRUCTION, "target": 0.9}
    for name in ("sem_filter", "sem_filter_cascade"):
        out, row = bench.lotus(name, task)
        scored.append(with_binary(row, out.get("pred"), truth))

    kept, row = bench.gwlab("df.gw.filter", lambda o: rows.gw.filter(CONDITION, state="{text}", **o))
    scored.append(with_binary(row, rows.index.isin(kept.index), truth))

    # the cascade: the labels as the oracle (keyless), the decision model as the cheap proxy
    asked = {"refund": json.loads((DATA.parent / "questions.json").read_text())["refund"]}
    cascade = gwlab.Cascade(oracle=truth, target=0.8, delta=0.1, sample=20, seed=SEED)
    out, row = bench.gwlab("df.gw.decide, cascade (accuracy >= 0.8, delta 0.1)",
                           lambda o: rows.gw.decide("{text}", asked, cascade=cascade, **o))
    row["oracle_calls"] = out.run.cascade["oracle_calls"]["total"]
    scored.append(with_binary(row, out["refund__answer"].astype(bool), truth))
    return scored + [binary_row({"side": "baseline", "operator": name}, q) for name, q in baselines(truth)]


def with_binary(row: dict[str, Any], pred: Any, truth: pd.Series) -> dict[str, Any]:
    """The row with accuracy and precision, recall and F1 on refunds (None where the operator failed)."""
    return binary_row(row, None if pred is None else Binary.of([bool(p) for p in pred], truth))


def binary_row(row: dict[str, Any], q: Binary | None) -> dict[str, Any]:
    return {**row, "measure": "vs refund", "quality": None if q is None else q.accuracy,
            **{k: None if q is None else getattr(q, k) for k in ("precision", "recall", "f1", "kept")}}


def joins(bench: Bench, rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The messages joined to the queue table on both sides: accuracy against `team` (per message), and
    precision, recall and F1 on the (message, queue) pairs of the message's team, beside the baselines."""
    task = {"texts": rows["text"].tolist(), "left_ids": [int(i) for i in rows.index], "instruction": JOIN_INSTRUCTION,
            "right_texts": QUEUES["description"].tolist(), "right_ids": QUEUES.index.tolist()}
    out, row = bench.lotus("sem_join", task)
    pairs = [tuple(p) for p in out.get("pairs", [])]
    row["matches"] = len(pairs) if "pairs" in out else None
    majority, share = majority_share(rows["team"])
    scored = [pair_row(with_quality(row, "accuracy vs team", lambda: routing_accuracy(pairs, rows["team"]),
                                    "pairs" in out), pairs if "pairs" in out else None, rows["team"]),
              {"side": "baseline", "operator": f"always {majority!r} (majority team)", "measure": "accuracy vs team",
               "quality": share}]
    grid = pair_truth([], rows["team"])[1]
    scored += [{"side": "baseline", "operator": f"pairs: {name}", "measure": "pairs vs team",
                **{k: getattr(q, k) for k in ("precision", "recall", "f1", "kept")}} for name, q in baselines(grid)]

    merged, row = bench.gwlab("df.gw.merge", lambda o: rows.gw.merge(
        QUEUES, MERGE_CONDITION, left_on="{text}", right_on="{description}", how="left", **o))
    matched = merged["right_index"].dropna()
    row["matches"] = len(matched)
    accuracy = with_quality(row, "accuracy vs team", lambda: routing_accuracy(matched.items(), rows["team"]))
    scored.append(pair_row(accuracy, list(matched.items()), rows["team"]))
    return scored


def pair_row(row: dict[str, Any], pairs: list[Any] | None, teams: pd.Series) -> dict[str, Any]:
    """The row with precision, recall and F1 on its matched pairs (None where the operator failed)."""
    q = None if pairs is None else Binary.of(*pair_truth(pairs, teams))
    return {**row, **{k: None if q is None else getattr(q, k) for k in ("precision", "recall", "f1", "kept")}}


def topks(bench: Bench, rows: pd.DataFrame, k: int) -> tuple[list[dict[str, Any]], str]:
    """The k most urgent rows on both sides: the share labelled `urgent`, and how many both sides chose."""
    task = {"texts": rows["text"].tolist(), "ids": [int(i) for i in rows.index], "instruction": TOPK_INSTRUCTION,
            "k": k, "seed": SEED}
    out, row = bench.lotus("sem_topk", task)
    lotus_chosen = out.get("chosen", [])
    measure = f"urgent share of top {k}"
    scored = [chosen_row(with_quality(row, measure, lambda: share_positive(lotus_chosen, rows["urgent"]),
                                      "chosen" in out), lotus_chosen if "chosen" in out else None, rows["urgent"])]

    top, row = bench.gwlab("df.gw.topk", lambda o: rows.gw.topk(URGENCY, k, state="{text}", levels=URGENCY_LEVELS,
                                                               **o))
    row["comparisons"] = top.run.comparisons
    scored.append(chosen_row(with_quality(row, measure, lambda: share_positive(top.index, rows["urgent"])),
                             list(top.index), rows["urgent"]))
    urgent_n = int(rows["urgent"].astype(bool).sum())
    scored.append({"side": "baseline", "operator": f"a random {k} (expected)", "measure": measure,
                   "quality": urgent_n / len(rows), "precision": urgent_n / len(rows), "recall": k / len(rows),
                   "kept": k})
    both = len(set(lotus_chosen) & set(top.index)) if "chosen" in out else None
    urgent = rows["urgent"].astype(bool)
    return scored, (f"top {k}: chosen by both sides {both} of {k}; urgent base rate {urgent.mean():.3f} (a random "
                    f"{k}'s expected share); a perfect ranking's share {min(k, int(urgent.sum())) / k:.3f}")


def chosen_row(row: dict[str, Any], chosen: list[Any] | None, labels: pd.Series) -> dict[str, Any]:
    """The row with precision, recall and F1 of the chosen rows on the positive label (None where it failed)."""
    q = None if chosen is None else Binary.of(*chosen_truth(chosen, labels))
    return {**row, **{k: None if q is None else getattr(q, k) for k in ("precision", "recall", "f1", "kept")}}


def with_quality(row: dict[str, Any], measure: str, score: Callable[[], float], ok: bool = True) -> dict[str, Any]:
    """The row with its quality measure named, and its value only where the operator answered."""
    return {**row, "measure": measure, "quality": score() if ok else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60, help="messages for the filters")
    parser.add_argument("--join-rows", type=int, default=20, help="messages joined to the 12 queues")
    parser.add_argument("--topk-rows", type=int, default=40, help="messages the top k is taken from")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--only", nargs="+", choices=["filter", "join", "topk"], default=["filter", "join", "topk"],
                        help="the operator pairs to run (default: all three)")
    args = parser.parse_args()

    messages = pd.read_csv(DATA, index_col="id")
    server = local.start()
    bench = Bench(server, gwlab.Gateway(server.base_url, server.api_key), lotus_python(), args.concurrency)
    try:
        results = filters(bench, messages.head(args.rows)) if "filter" in args.only else []
        results += joins(bench, messages.head(args.join_rows)) if "join" in args.only else []
        ranked, overlap = topks(bench, messages.head(args.topk_rows), args.k) if "topk" in args.only else ([], "")
    finally:
        bench.gw.close()
        server.stop()
    print(f"filter: {args.rows} messages, {CONDITION!r}; join: {args.join_rows} messages x {len(QUEUES)} queues, "
          f"{MERGE_CONDITION!r}; top k: {args.k} of {args.topk_rows} messages, {URGENCY!r}")
    print(f"LOTUS: chat model {TEXT_MODEL}, max_tokens {MAX_TOKENS}, concurrency {args.concurrency} "
          f"(max_batch_size); gwlab: decision model local/decide-e5-small (no output tokens), "
          f"concurrency {args.concurrency}; LOTUS wall_s excludes its import")
    print(pd.DataFrame(results + ranked).to_string(index=False))
    print(overlap)


if __name__ == "__main__":
    main()
