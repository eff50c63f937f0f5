"""Operators across rows on the 312 labelled support messages, on the embedded gateway.

    python bench/operators.py                        # all 312 messages; aggregate over 24 of them
    python bench/operators.py --rows 60 --aggregate-rows 12

Prints, for docs/benchmarks.md:
  - merge: messages x a small table of teams (one choice question per message) against asking every
    (message, team) pair, in requests (the plan, known before sending) and accuracy against the `team` label;
  - filter (the refund condition), topk (the 10 most urgent) and aggregate (a list of issues per team, by
    map-reduce under the text model's input limit): requests, wall time and, where a label exists, accuracy.
No checkpoint: every request is sent and counted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd
from harness.quality import Binary, baselines, majority_share
from harness.support_tasks import (  # bench/harness: this script's folder is on sys.path
    MERGE_CONDITION,
    QUEUES,
    URGENCY,
    URGENCY_LEVELS,
)

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway

T = TypeVar("T")
DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "support_messages.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=312)
    parser.add_argument("--aggregate-rows", type=int, default=24)
    args = parser.parse_args()
    messages = pd.read_csv(DATA, index_col="id").iloc[: args.rows]
    from gwlab import local

    server = local.start()
    try:
        with Gateway(server.base_url, server.api_key) as gw:
            run(messages, gw, args.aggregate_rows)
    finally:
        server.stop()


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """The call's result and its wall time in seconds."""
    start = time.perf_counter()
    out = call()
    return out, time.perf_counter() - start


def run(messages: pd.DataFrame, gw: Gateway, aggregate_rows: int) -> None:
    options = {"gateway": gw, "checkpoint": None, "progress": False}
    print(f"{len(messages)} messages; queues table: {len(QUEUES)} rows")
    condition = MERGE_CONDITION
    plan = messages.gw.merge(QUEUES, condition, left_on="text", right_on="description", dry_run=True)
    merged, seconds = timed(lambda: messages.gw.merge(QUEUES, condition, left_on="text", right_on="description",
                                                      how="left", **options))
    routed = merged["team_y"].astype(object).where(merged["right_index"].notna(), "other")
    accuracy = (routed.to_numpy() == messages["team"].to_numpy()).mean()
    majority, share = majority_share(messages["team"])
    print(f"merge: plan {plan.requests} requests ({plan.strategy}) vs pairwise {plan.pairwise}: "
          f"{plan.pairwise / plan.requests:.1f}x fewer; sent {merged.run.sent} in {seconds:.1f} s; "
          f"accuracy vs team label {accuracy:.3f} ({(routed == 'other').sum()} matched none: 'other'); "
          f"always {majority!r} (the majority team) {share:.3f}")

    kept, seconds = timed(lambda: messages.gw.filter("The customer asks for money back", state="text",
                                                     **options))
    truth = messages["refund"].astype(bool)
    print(f"filter (refund): {kept.run.sent} requests in {seconds:.1f} s; kept {len(kept)}; vs the refund label "
          "(accuracy, precision, recall, F1 on refunds, rows kept):")
    for name, q in [("filter", Binary.of(messages.index.isin(kept.index), truth)), *baselines(truth)]:
        print(f"  {name}: {q.cells()}")

    top, seconds = timed(lambda: messages.gw.topk(URGENCY, 10, state="text", levels=URGENCY_LEVELS,
                                                  **options))
    urgent = messages["urgent"].astype(bool)
    hits = int(urgent.loc[top.index].sum())
    print(f"topk (10 most urgent): {top.run.sent} requests ({top.run.comparisons} comparisons) in {seconds:.1f} s; "
          f"urgent-labelled among them {hits}/10 (precision at 10 {hits / 10:.2f}; a random 10 expects the base "
          f"rate {urgent.mean():.2f}, a perfect ranking {min(10, int(urgent.sum())) / 10:.2f}; recall at 10 "
          f"{hits / urgent.sum():.3f} of {int(urgent.sum())} urgent)")

    some = messages.iloc[:aggregate_rows][["team", "text"]]
    summary, seconds = timed(lambda: some.gw.aggregate("List the customers' issues in a few words.", by="team",
                                                       max_tokens=48, max_input_tokens=256, **options))
    print(f"aggregate ({len(some)} messages by team, packed to 256 input tokens): {summary.run.sent} requests "
          f"over {summary.run.levels} levels in {seconds:.1f} s; per team requests "
          f"{ {k: int(v) for k, v in summary['requests'].items()} }; errors {int(summary['__error'].notna().sum())}")


if __name__ == "__main__":
    main()
