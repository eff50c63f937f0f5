"""A cascade on the 312 labelled support messages, the labels as the oracle (keyless, on the embedded gateway).

    python bench/cascade.py         # refund (noul), accuracy targets 0.75/0.80/0.85, delta 0.1, sample 40
    python bench/cascade.py --question team --targets 0.7 0.75 0.8

The cheap model (`local/decide-e5-small`) answers every row once (checkpointed, so the cascades below
reuse its answers); each cascade then samples rows for the oracle (the label column, a stand-in for
people or a better model), sets the threshold on the cheap model's confidence that meets the accuracy
target with probability >= 1 - delta, and sends the rows below it to the oracle. Printed per line: the
oracle calls (and how many times fewer than asking the oracle for every row), the proxy's billed input
tokens, the accuracy achieved on all rows against the labels with its 95 % Wilson interval, and whether
the target was met. The cheap model alone and the oracle alone are the two ends.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

import gwlab
from gwlab import local
from gwlab.client.gateway import Gateway
from gwlab.stats.intervals import wilson

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--question", default="refund")
    parser.add_argument("--targets", type=float, nargs="+", default=[0.75, 0.80, 0.85])
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    messages = pd.read_csv(DATA / "support_messages.csv", index_col="id")
    asked = {args.question: json.loads((DATA / "questions.json").read_text())[args.question]}
    labels = messages[args.question]
    server = local.start()
    try:
        with Gateway(server.base_url, server.api_key) as gw, tempfile.TemporaryDirectory() as folder:
            options = {"gateway": gw, "progress": False, "checkpoint": Path(folder) / "bench.sqlite"}
            cheap = messages.gw.decide("{text}", asked, **options)
            print(f"{len(messages)} messages, question {args.question!r}, delta {args.delta}, sample "
                  f"{args.sample}, candidates {args.candidates}, seed {args.seed}\n")
            print("| run | threshold | oracle calls | fewer than oracle-only | proxy input tokens "
                  "| accuracy [95 % Wilson] | target met |")
            print("|---|---:|---:|---:|---:|---|---|")
            print(line("cheap model alone | 0", 0, cheap.run.input_tokens, answers(cheap, args.question) == labels))
            for target in args.targets:
                cascade = gwlab.Cascade(oracle=labels, target=target, delta=args.delta, sample=args.sample,
                                        candidates=args.candidates, seed=args.seed)
                out = messages.gw.decide("{text}", asked, cascade=cascade, **options)
                hits = out[f"{args.question}__answer"] == labels
                c = out.run.cascade
                name = f"cascade, accuracy >= {target} | {c['threshold']:.3f}"
                print(line(name, c["oracle_calls"]["total"], cheap.run.input_tokens, hits, target))
            print(line("oracle alone | inf", len(messages), 0, pd.Series(True, index=labels.index)))
    finally:
        server.stop()


def answers(frame: pd.DataFrame, question: str) -> pd.Series:
    """The cheap model's own answer: P(true) >= 0.5 for a noul question, else the choice or level."""
    if f"{question}__noul" in frame:
        return frame[f"{question}__noul"] >= 0.5
    return frame[f"{question}__choice"] if f"{question}__choice" in frame else frame[f"{question}__level"]


def line(name: str, calls: int, tokens: int, hits: pd.Series, target: float | None = None) -> str:
    k, n = int(hits.sum()), len(hits)
    low, high = wilson(k, n)
    fewer = f"{n / calls:.1f}×" if calls else "all"
    met = "" if target is None else ("yes" if k / n >= target else "**no**")
    return f"| {name} | {calls} | {fewer} | {tokens} | {k / n:.3f} [{low:.3f}, {high:.3f}] | {met} |"


if __name__ == "__main__":
    main()
