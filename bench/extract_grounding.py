"""Grounding catches invented values: `df.gw.extract(grounding="flag")` on labelled sets, local models.

    python bench/extract_grounding.py                            # both local text models, every set, pooled
    python bench/extract_grounding.py --models local/gemma-3-270m  # one model
    python bench/extract_grounding.py --sets written               # one set only
    python bench/extract_grounding.py --rows 10                    # a quick look
    python bench/extract_grounding.py --checkpoint /tmp/g.sqlite   # resumable: a rerun asks only what is missing

Data: the first 40 rows of notebooks/data/support_messages.csv with the order id, amount and date each
states (bench/data/support_grounding_labels.jsonl: 3 values among 120, the rest null), and
bench/data/grounding_labelled.jsonl (130 messages written for this benchmark, in 6 languages, with ids,
amounts and dates in many writings and names with accents or in kanji and kana; 204 values among 520) and
bench/data/grounding_written2.jsonl (set "written2": 108 more, value-dense, in 10 languages; 350 values
among 432) and bench/data/grounding_written3.jsonl (set "written3": 89 messages to an electronics repair
shop, 12 languages, 260 values among 356; held out from the design of the field-kind check). Greedy
(temperature 0), so a run is repeatable on one machine (see docs/benchmarks.md for other machines). Per model,
data set and field it prints the values the model gave, split into right (equal to the label after
normalising: an id's case and separators, an amount within half a cent, a date; the support messages
state no year, so their dates compare month and day), invented (the label is null) and wrong; then
how many of each grounding left ungrounded (not_found, or misplaced: written only as another kind of
span than the field's, in brackets). The two goals: invented values caught (ungrounded) >= 90 %,
right values wrongly flagged (what `grounding="drop"` would drop) <= 2 %, each with its 95 % Wilson
interval and its verdict ("shown": the whole interval on the goal's side), beside the trivial baselines:
no grounding (catches 0 %, drops 0 %) and dropping every value (catches 100 %, drops 100 %); per model and
set, per model pooled over the sets, and pooled over every model.
Without --checkpoint every row is asked. Figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pandas as pd

from gwlab.client.gateway import Gateway
from gwlab.stats.intervals import wilson
from gwlab.wire.grounding import MISPLACED, UNGROUNDED
from gwlab.wire.models import DEFAULT_MODELS

HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent / "notebooks" / "data" / "support_messages.csv"
SUPPORT_LABELS = HERE / "data" / "support_grounding_labels.jsonl"
WRITTEN = HERE / "data" / "grounding_labelled.jsonl"
WRITTEN2 = HERE / "data" / "grounding_written2.jsonl"
WRITTEN3 = HERE / "data" / "grounding_written3.jsonl"
MODELS = (DEFAULT_MODELS["text"], "local/gemma-3-270m")
SCHEMAS = {
    "support": {"order_id": str | None, "amount": float | None, "date": dt.date | None},
    "written": {"order_id": str | None, "amount": float | None, "date": dt.date | None, "name": str | None},
}
SCHEMAS["written2"] = SCHEMAS["written3"] = SCHEMAS["written"]
COUNTS = ("given", "right", "invented", "wrong", "invented_caught", "right_flagged", "wrong_caught",
          "invented_misplaced", "right_misplaced")
PROMPT = ("Customer message: {text}\n\nGive the order id, the amount of money, the date and the customer's "
          "name that the message states.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help=f"text models to measure (default: both local ones, {', '.join(MODELS)})")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="the labelled sets to run")
    parser.add_argument("--rows", type=int, default=None, help="only the first N rows of each set")
    parser.add_argument("--max-tokens", type=int, default=72)
    parser.add_argument("--checkpoint", default=None,
                        help="a checkpoint file: answers kept, so a stopped run resumes (default: ask every row)")
    args = parser.parse_args()
    print("$ python " + " ".join(sys.argv))
    sets = {name: SETS[name]() for name in args.sets}
    from gwlab import local

    server = local.start()
    totals: dict[str, dict[str, int]] = {}
    try:
        with Gateway(server.base_url, server.api_key) as gw:
            for model in args.models:
                for name, frame in sets.items():
                    counts = measure(gw, model, name, frame.iloc[: args.rows], args.max_tokens, args.checkpoint)
                    pooled = totals.setdefault(model, dict.fromkeys(counts, 0))
                    for key, value in counts.items():
                        pooled[key] += value
    finally:
        server.stop()
    for model, pooled in totals.items():
        print(f"\n{model}, sets pooled ({', '.join(sets)}):")
        print_goals(pooled)
    print(f"\nAll models and sets pooled ({', '.join(totals)}):")
    print_goals({k: sum(t[k] for t in totals.values()) for k in next(iter(totals.values()))})


def support_set() -> pd.DataFrame:
    labels = pd.read_json(SUPPORT_LABELS, lines=True, dtype=False).set_index("id")
    texts = pd.read_csv(SUPPORT).set_index("id")["text"]
    return labels.join(texts, how="left")[["text", *SCHEMAS["support"]]]


def written_set(path: Path = WRITTEN) -> pd.DataFrame:
    return pd.read_json(path, lines=True, dtype=False).set_index("id")[["text", *SCHEMAS["written"]]]


SETS = {"support": support_set, "written": written_set, "written2": lambda: written_set(WRITTEN2),
        "written3": lambda: written_set(WRITTEN3)}


def measure(gw: Gateway, model: str, name: str, frame: pd.DataFrame, max_tokens: int,
            checkpoint: str | None = None) -> dict[str, int]:
    """Extract `frame` with `model`, print the per-field table and return the pooled counts."""
    schema = SCHEMAS[name]
    start = time.perf_counter()
    out = frame[["text"]].gw.extract(PROMPT, schema, model=model, max_tokens=max_tokens, gateway=gw,
                                     params={"temperature": 0}, grounding="flag", checkpoint=checkpoint,
                                     progress=True, errors="coerce",
                                     concurrency=2)  # the local engine answers one at a time: a deep queue times out
    seconds = time.perf_counter() - start
    errors = out.loc[out["__status"].astype(str) == "error", "__error"].astype(str).str.split(":").str[0]
    reasons = ", ".join(f"{n} {kind}" for kind, n in errors.value_counts().items())
    print(f"\n{model} on {name} ({len(out)} rows in {seconds:.0f} s; {len(errors)} error rows, left out"
          f"{': ' + reasons if reasons else ''})")
    print("| field | values given | right | invented | wrong | invented caught (misplaced) | right flagged "
          "(misplaced) | wrong caught |")
    print("|---|---|---|---|---|---|---|---|")
    pooled = dict.fromkeys(COUNTS, 0)
    for field in schema:
        row = field_counts(out, frame, field, month_day=name == "support")
        for key in pooled:
            pooled[key] += row[key]
        print(f"| {field} | {row['given']} | {row['right']} | {row['invented']} | {row['wrong']} | "
              f"{row['invented_caught']} ({row['invented_misplaced']}) | {row['right_flagged']} "
              f"({row['right_misplaced']}) | {row['wrong_caught']} |")
    print_goals(pooled)
    return pooled


def field_counts(out: pd.DataFrame, truth: pd.DataFrame, field: str, month_day: bool) -> dict[str, int]:
    answered = out["__status"].astype(str) != "error"
    counts = dict.fromkeys(COUNTS, 0)
    for ok, value, label, status in zip(answered, out[field], truth[field], out[f"{field}__grounding"],
                                        strict=True):
        if not ok or _missing(value):
            continue
        lost, misplaced = str(status) in UNGROUNDED, str(status) == MISPLACED
        counts["given"] += 1
        kind = "invented" if _missing(label) else "right" if same(field, value, label, month_day) else "wrong"
        counts[kind] += 1
        counts[{"invented": "invented_caught", "right": "right_flagged", "wrong": "wrong_caught"}[kind]] += lost
        if kind != "wrong":
            counts[f"{kind}_misplaced"] += misplaced
    return counts


def same(field: str, value: Any, label: Any, month_day: bool) -> bool:
    """A value equal to its label once the writing is normalised (ids: case and separators)."""
    if field == "amount":
        return abs(float(value) - float(label)) <= 0.005
    if field == "date":
        day, want = pd.Timestamp(value).date(), dt.date.fromisoformat(str(label))
        return (day.month, day.day) == (want.month, want.day) if month_day else day == want
    return _plain(value) == _plain(label)


def _plain(text: Any) -> str:
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    return re.sub(r"[\W_]+", "", folded)


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def print_goals(c: dict[str, int]) -> None:
    caught, dropped = (c["invented_caught"], c["invented"]), (c["right_flagged"], c["right"])
    print(f"invented values caught: {_share(*caught)} (goal >= 90 %: {_verdict(*caught, 0.90, at_least=True)}; "
          "no grounding: 0 %, drop everything: 100 %)")
    print(f"right values wrongly flagged (dropped with grounding='drop'): {_share(*dropped)} "
          f"(goal <= 2 %: {_verdict(*dropped, 0.02, at_least=False)}; no grounding: 0 %, drop everything: 100 %)")
    print(f"wrong values caught: {_share(c['wrong_caught'], c['wrong'])}; raw: "
          + json.dumps({k: c[k] for k in ("given", "right", "invented", "wrong")}))


def _share(k: int, n: int) -> str:
    if n == 0:
        return "- of 0"
    low, high = wilson(k, n, 0.95)
    return f"{k}/{n} = {k / n:.1%} [{float(low):.1%}, {float(high):.1%}]"


def _verdict(k: int, n: int, goal: float, at_least: bool) -> str:
    """Shown when the whole 95 % Wilson interval is on the goal's side, missed when none of it is."""
    if n == 0:
        return "no values"
    low, high = (float(x) for x in wilson(k, n, 0.95))
    near, far = (low, high) if at_least else (high, low)
    if (near >= goal) if at_least else (near <= goal):
        return "shown"
    return "missed" if ((far < goal) if at_least else (far > goal)) else "not shown (the interval straddles it)"


if __name__ == "__main__":
    main()
