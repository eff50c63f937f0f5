"""gwlab's operators beside LOTUS' on the same rows of the 312 labelled support messages, keyless.

    .venv/bin/python bench/lotus_side_by_side.py [--rows 60]

Sets up LOTUS in its own venv (`.venv-lotus`: lotus-ai with the CPU torch wheel, never a CUDA build;
not part of `make test`), starts the embedded gateway, and runs on the same rows: LOTUS' `sem_filter`
(one chat request per row, its answer parsed for "True") and its filter cascade, then gwlab's
`df.gw.filter` (one decision per row) and `df.gw.decide` with a cascade whose oracle is the label column
(LOTUS' cascade here uses the same local chat model as helper and oracle: the embedded gateway has one).
Requests and tokens are the gateway's own request log, so both sides are counted the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-lotus"
LOTUS = ["torch==2.13.0", "lotus-ai==1.2.4"]  # the CPU wheel pinned first, so lotus-ai never pulls a CUDA one
DATA = ROOT / "notebooks" / "data" / "support_messages.csv"
CONDITION = "The customer asks for a refund"
INSTRUCTION = "Does the message {text} ask for a refund?"
TEXT_MODEL = "local/smollm2-135m-instruct"


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
    return {"requests": len(rows), "input_tokens": sum(r[1] for r in rows), "output_tokens": sum(r[2] for r in rows),
            "chat_requests": sum(r[0].endswith("/chat/completions") for r in rows)}


def mark_of(db: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COALESCE(MAX(id), 0) FROM request_log").fetchone()[0]


def accuracy(pred: list[bool], truth: pd.Series) -> float:
    return float((pd.Series(pred, index=truth.index) == truth).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    import gwlab
    from gwlab import local

    rows = pd.read_csv(DATA, index_col="id").head(args.rows)
    truth = rows["refund"].astype(bool)
    python = lotus_python()
    server = local.start()
    gw = gwlab.Gateway(server.base_url, server.api_key)
    results: list[dict[str, object]] = []
    try:
        task = {"model": TEXT_MODEL, "texts": rows["text"].tolist(), "instruction": INSTRUCTION,
                "max_tokens": 16, "concurrency": args.concurrency, "target": 0.9}
        mark, started = mark_of(server.db_path), time.perf_counter()
        env = {**os.environ, "GWLAB_BENCH_URL": server.base_url, "GWLAB_BENCH_KEY": server.api_key,
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([str(python), str(ROOT / "bench" / "lotus" / "worker.py"), json.dumps(task)], env=env,
                              capture_output=True, text=True, check=False)
        lotus_out = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
        lotus_log = logged(server.db_path, mark)
        for name, out in lotus_out.items():
            row = {"side": "LOTUS", "operator": name, "wall_s": out.get("seconds"), **out.get("usage", {})}
            row["accuracy"] = accuracy(out["pred"], truth) if "pred" in out else None
            row["error"] = out.get("error")
            results.append(row)
        results.append({"side": "LOTUS", "operator": "(gateway log, both runs)", **lotus_log,
                        "wall_s": time.perf_counter() - started})

        mark, started = mark_of(server.db_path), time.perf_counter()
        kept = rows.gw.filter(CONDITION, state="{text}", gateway=gw, checkpoint=None, progress=False,
                              concurrency=args.concurrency)
        pred = rows.index.isin(kept.index)
        results.append({"side": "gwlab", "operator": "df.gw.filter", "wall_s": time.perf_counter() - started,
                        **logged(server.db_path, mark), "accuracy": float((pred == truth.to_numpy()).mean())})

        # the cascade: the labels as the oracle (keyless), the decision model as the cheap proxy
        asked = {"refund": json.loads((DATA.parent / "questions.json").read_text())["refund"]}
        mark, started = mark_of(server.db_path), time.perf_counter()
        cascade = gwlab.Cascade(oracle=truth, target=0.8, delta=0.1, sample=20, seed=0)
        out = rows.gw.decide("{text}", asked, cascade=cascade, gateway=gw, checkpoint=None, progress=False,
                             concurrency=args.concurrency)
        c = out.run.cascade
        results.append({"side": "gwlab", "operator": "decide, cascade (accuracy >= 0.8, delta 0.1)",
                        "wall_s": time.perf_counter() - started, **logged(server.db_path, mark),
                        "oracle_calls": c["oracle_calls"]["total"],
                        "accuracy": float((out["refund__answer"] == truth).mean())})
    finally:
        gw.close()
        server.stop()
    table = pd.DataFrame(results)
    print(f"{args.rows} messages; question: {CONDITION!r}; LOTUS chat model {TEXT_MODEL} (max_tokens 16), "
          f"gwlab decision model local/decide-e5-small; concurrency {args.concurrency} on both sides")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
