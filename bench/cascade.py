"""Cascades on the 312 labelled support messages, the labels as the oracle (keyless, on the embedded gateway).

    python bench/cascade.py                 # refund: accuracy 0.8/0.85/0.9, precision 0.8, recall 0.9/0.95; 1,000 seeds
    python bench/cascade.py --question team --specs accuracy:0.8 accuracy:0.9

The cheap model (`local/decide-e5-small`) answers every row once (checkpointed). Each cascade spec then
runs once for real (`df.gw.decide(..., cascade=...)`, seed 0) and over `--seeds` seeds of its sample
through the same code without the gateway (`cascade_run.sample_positions`, `threshold_for`,
`final_answers`: the proxy's answers do not change with the seed, only the sample does); seed 0 of the
simulation must equal the real run. Printed:
  1. the quality of every answer set on all rows against the labels, beside the base rate and the
     always-yes/always-no answers: accuracy, and precision, recall and F1 on the positive class (a
     choice question: accuracy beside the majority class's share);
  2. per spec, over the seeds: the share of seeds whose delivered answers met the target (the guarantee
     asks >= 1 - delta), the oracle calls and the saving (all rows / oracle calls) as median [5 %, 95 %],
     the delivered metric likewise, beside the clairvoyant cascade: the fewest oracle calls any threshold
     on the same score needs to meet the target, chosen knowing every label.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from harness.quality import HEADER, Binary, baselines, majority_share, spread  # bench/harness is on sys.path

import gwlab
from gwlab import local
from gwlab.client.gateway import Gateway
from gwlab.frames.cascade.oracle import CascadeQuestion
from gwlab.frames.cascade.run import final_answers, sample_positions, threshold_for

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data"
NOUL_SPECS = ["accuracy:0.8", "accuracy:0.85", "accuracy:0.9", "precision:0.8", "precision:0.8:150", "recall:0.9",
              "recall:0.95:150"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--question", default="refund")
    parser.add_argument("--specs", nargs="+", help="metric:target[:sample], e.g. recall:0.9 or recall:0.95:150")
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=1000)
    args = parser.parse_args()
    messages = pd.read_csv(DATA / "support_messages.csv", index_col="id")
    asked = {args.question: json.loads((DATA / "questions.json").read_text())[args.question]}
    labels = messages[args.question]
    specs = args.specs or (NOUL_SPECS if asked[args.question]["type"] == "noul" else ["accuracy:0.8", "accuracy:0.9"])
    server = local.start()
    try:
        with Gateway(server.base_url, server.api_key) as gw, tempfile.TemporaryDirectory() as folder:
            options = {"gateway": gw, "progress": False, "checkpoint": Path(folder) / "bench.sqlite"}
            cheap = messages.gw.decide("{text}", asked, **options)
            print(f"{len(messages)} messages, question {args.question!r}, delta {args.delta}, sample {args.sample}, "
                  f"{args.seeds} seeds; the oracle is the label column\n")
            real, seeds = {}, []
            for spec in specs:
                metric, target, *sample = spec.split(":")
                cascade = gwlab.Cascade(oracle=labels, metric=metric, target=float(target), delta=args.delta,
                                        sample=int(sample[0]) if sample else args.sample)
                real[spec] = messages.gw.decide("{text}", asked, cascade=cascade, **options)
                seeds.append((spec, over_seeds(cheap, labels, cascade, args.seeds, real[spec])))
            quality_table(cheap, labels, real, args.question)
            seeds_table(seeds, len(messages), args.delta)
    finally:
        server.stop()


def over_seeds(cheap: pd.DataFrame, labels: pd.Series, cascade: gwlab.Cascade, seeds: int,
               real: pd.DataFrame) -> dict[str, Any]:
    """The cascade's oracle calls and delivered metric per seed, and the clairvoyant's calls."""
    question = CascadeQuestion.of({labels.name: {"type": _kind(cheap, labels.name)}}, cascade)
    columns = cheap[[c for c in cheap.columns if str(c).startswith(f"{labels.name}__")]]
    score, mine = question.score(columns, cascade.metric), question.answers(columns)
    truth = question.normalise(labels, "oracle")
    calls, achieved = [], []
    for seed in range(seeds):
        run = cascade_of(cascade, seed)
        valid, sampled = sample_positions(score, run)
        asked = np.unique(sampled)
        said = {int(p): truth[p] for p in asked}
        _, answered = threshold_for(score, mine, (valid, sampled), said, run)
        routed = np.flatnonzero(~answered & ~np.isin(np.arange(len(score)), asked))
        said.update({int(p): truth[p] for p in routed})
        final = final_answers(mine, answered, said, cascade.metric)
        calls.append(len(asked) + len(routed))
        achieved.append(delivered(final, truth, cascade.metric))
        if seed == 0 and calls[0] != real.run.cascade["oracle_calls"]["total"]:
            raise AssertionError(f"seed 0: {calls[0]} oracle calls simulated, {real.run.cascade['oracle_calls']}"
                                 " in the real cascade")
    return {"calls": np.array(calls), "achieved": np.array(achieved), "target": cascade.target,
            "clairvoyant": clairvoyant(score, mine, truth, cascade)}


def cascade_of(cascade: gwlab.Cascade, seed: int) -> gwlab.Cascade:
    return gwlab.Cascade(oracle=cascade.oracle, metric=cascade.metric, target=cascade.target, delta=cascade.delta,
                         sample=cascade.sample, seed=seed, candidates=cascade.candidates)


def _kind(frame: pd.DataFrame, question: str) -> str:
    return "noul" if f"{question}__noul" in frame else "choice" if f"{question}__choice" in frame else "score"


def delivered(final: np.ndarray, truth: np.ndarray, metric: str) -> float:
    """The metric of the delivered answers against the labels (the oracle), on every row."""
    if metric == "accuracy":
        return float(np.mean([f == t for f, t in zip(final, truth, strict=True)]))
    q = Binary.of([bool(f) for f in final], [bool(t) for t in truth])
    return q.precision if metric == "precision" else q.recall


def clairvoyant(score: np.ndarray, mine: np.ndarray, truth: np.ndarray, cascade: gwlab.Cascade) -> int:
    """The fewest oracle calls of any threshold on the score whose delivered answers meet the target,
    the threshold chosen knowing every label (no sample to pay for)."""
    best = len(score)
    for t in np.concatenate([np.unique(score), [np.inf, 0.0]]):
        answered = score < t if cascade.metric == "recall" else score >= t
        said = {int(p): truth[p] for p in np.flatnonzero(~answered)}
        if delivered(final_answers(mine, answered, said, cascade.metric), truth, cascade.metric) >= cascade.target:
            best = min(best, int((~answered).sum()))
    return best


def quality_table(cheap: pd.DataFrame, labels: pd.Series, real: dict[str, pd.DataFrame], question: str) -> None:
    """Every answer set on all rows against the labels, beside the trivial answers."""
    if f"{question}__noul" not in cheap:
        value, share = majority_share(labels)
        print(f"| answers | accuracy |\n|---|---:|\n| always {value!r} (majority class) | {share:.3f} |")
        print(f"| cheap model alone | {(cheap[f'{question}__choice'] == labels).mean():.3f} |")
        for spec, out in real.items():
            print(f"| cascade {spec} (seed 0, delivered) | {(out[f'{question}__answer'] == labels).mean():.3f} |")
        print()
        return
    truth = labels.astype(bool)
    rows = [*baselines(truth), ("cheap model alone", Binary.of(cheap[f"{question}__noul"] >= 0.5, truth))]
    rows += [(f"cascade {spec} (seed 0, delivered)", Binary.of(out[f"{question}__answer"].astype(bool), truth))
             for spec, out in real.items()]
    rows.append(("oracle alone", Binary.of(truth, truth)))
    print(f"| answers {HEADER}\n|---|---:|---:|---:|---:|---:|")
    for name, q in rows:
        print(f"| {name} | {q.cells()} |")
    print()


def seeds_table(seeds: list[tuple[str, dict[str, Any]]], rows: int, delta: float) -> None:
    print(f"| cascade | target met (of seeds; >= {1 - delta:.2f} promised) | oracle calls | saving (×) "
          "| delivered metric | clairvoyant calls (saving) |\n|---|---:|---:|---:|---:|---:|")
    for spec, s in seeds:
        met = float((s["achieved"] >= s["target"] - 1e-12).mean())
        print(f"| {spec} | {met:.3f} | {spread(s['calls'])} | {spread(rows / s['calls'])} "
              f"| {spread(s['achieved'])} | {s['clairvoyant']} ({rows / max(s['clairvoyant'], 1):.1f}×) |")


if __name__ == "__main__":
    main()
