"""Absent is an answer: does `df.gw.extract` leave a field null when the text does not state it?

    python bench/extract_absent.py                     # the embedded gateway's local text model
    GWLAB_BASE_URL=... GWLAB_API_KEY=... python bench/extract_absent.py --model NAME   # and that gateway

On `bench/data/extract_labelled.jsonl` (32 short support messages written for this, with the true
order number, product and refund ask; order and product are absent from many), prints per field:
values right, values invented (a value where the truth is null), values missed (null where the truth
has one), wrong values, and rows whose answer failed validation; then the wall time. No checkpoint:
every row is asked. Figures in docs/benchmarks.md ("Typed answers").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Literal

import pandas as pd

import gwlab
from gwlab import EvaluationWarning
from gwlab.client.gateway import Gateway

DATA = Path(__file__).resolve().parent / "data" / "extract_labelled.jsonl"
PRODUCTS = ["kettle", "headphones", "blender", "laptop", "vacuum", "coffee machine", "desk lamp", "phone case"]
SCHEMA = {"order": int | None, "product": Literal[tuple(PRODUCTS)] | None, "refund": bool}
PROMPT = ("Customer message: {text}\n\nGive the order number, the product the message is about and whether "
          "the customer asks for money back.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="only the first N messages")
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--max-reasks", type=int, default=0)
    parser.add_argument("--model", default=None, help="the model on GWLAB_BASE_URL (default: the family's)")
    args = parser.parse_args()
    labelled = pd.read_json(DATA, lines=True, dtype={"order": "Int64"}).set_index("id").iloc[: args.rows]
    print("$ python " + " ".join(sys.argv))
    from gwlab import local

    server = local.start()
    try:
        with Gateway(server.base_url, server.api_key) as gw:
            report("embedded (local text model)", labelled, gw, args, None)
    finally:
        server.stop()
    if os.environ.get("GWLAB_BASE_URL") and os.environ.get("GWLAB_API_KEY"):
        with Gateway(os.environ["GWLAB_BASE_URL"], os.environ["GWLAB_API_KEY"]) as gw:
            report(os.environ["GWLAB_BASE_URL"], labelled, gw, args, args.model)


def report(name: str, labelled: pd.DataFrame, gw: Gateway, args: argparse.Namespace, model: str | None) -> None:
    """Extract every row on `gw` and print the per-field table (`gwlab.evaluate(kind="fields")`)."""
    start = time.perf_counter()
    out = labelled[["text"]].gw.extract(PROMPT, SCHEMA, model=model, max_tokens=args.max_tokens,
                                        max_reasks=args.max_reasks, gateway=gw, checkpoint=None, progress=False)
    seconds = time.perf_counter() - start
    scored = out.join(labelled[list(SCHEMA)].add_prefix("true_"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        table = gwlab.evaluate(scored, truth={f: f"true_{f}" for f in SCHEMA}, kind="fields").metrics
    print(f"\n{name}: {len(out)} rows in {seconds:.0f} s ({seconds / len(out):.1f} s a row), "
          f"{int(table['n_missing'].max())} failed validation (left out), {int(out['__reasks'].sum())} re-asked")
    print("| field | rows | truth null | right | accuracy (95% Wilson) | invented | missed | wrong |")
    print("|---|---|---|---|---|---|---|---|")
    for field, row in table.iterrows():
        print(f"| {field} | {row['n']} | {row['truth_null']} | {row['right']} | {row['accuracy']:.2f} "
              f"[{row['accuracy_low']:.2f}, {row['accuracy_high']:.2f}] | {row['invented']} | {row['missed']} | "
              f"{row['wrong']} |")


if __name__ == "__main__":
    main()
