"""Print every figure of docs/evaluation.md, computed as notebook 03 computes them.

    .venv/bin/python docs/scripts/evaluation_table.py

The page's numbers are pasted from this script's output, never typed by hand, so they cannot drift
from the code (tests/test_evaluation_doc.py runs it and finds every line it prints in the page). It
asks the gateway that
`gwlab.connect()` finds: the embedded local one unless GWLAB_BASE_URL and GWLAB_API_KEY are set. The
split is notebook 03's: rows with `default_rng(0).random(n) < 0.5` fit each map, the others measure it.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import gwlab
from gwlab import EvaluationWarning
from gwlab.frames.evaluation.evaluate import Evaluation

DATA = Path(__file__).resolve().parents[2] / "notebooks" / "data"
MODEL = "local/decide-e5-small"
COST_RATIO = 4  # a missed urgent message costs four unnecessary escalations: escalate at 1 / (1 + 4)


def answers(gateway: gwlab.Gateway) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The labelled messages joined with the decision model's answers (notebook 03's first cell)."""
    messages = pd.read_csv(DATA / "support_messages.csv", index_col="id")
    questions = json.loads((DATA / "questions.json").read_text())
    out = messages.gw.decide("{text}", questions, model=MODEL, gateway=gateway, checkpoint=None, progress=False)
    return out, questions


def recalibration_table(evaluation: Evaluation, fit: np.ndarray) -> pd.DataFrame:
    """Accuracy over all rows; held-out ECE before and after each map, with T (notebook 03's table)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)  # a map that does not help shows in the table
        maps = {m: evaluation.recalibrate(m, fit=fit) for m in ("temperature", "isotonic")}
    rows = {}
    for qid, t in maps["temperature"].items():
        rows[qid] = {"accuracy": evaluation.metrics.loc[qid, "accuracy"], "ece_before": t.ece_before,
                     "ece_temperature": t.ece_after, "T": t.temperature,
                     "ece_isotonic": maps["isotonic"][qid].ece_after}
    return pd.DataFrame(rows).T


def markdown(table: pd.DataFrame, evaluation: Evaluation) -> str:
    """The page's table, row for row."""
    lines = ["| question | accuracy (all rows) | held-out ECE before | after temperature (T) | after isotonic |",
             "|---|---|---|---|---|"]
    for qid, row in table.iterrows():
        kind, options = evaluation.metrics.loc[qid, ["type", "options"]]
        what = "yes/no" if kind == "noul" else f"{options} options" if kind == "choice" else f"{options} levels"
        lines.append(f"| {qid} ({what}) | {row['accuracy']:.2f} | {row['ece_before']:.3f} | "
                     f"{row['ece_temperature']:.3f} ({row['T']:.2f}) | {row['ece_isotonic']:.3f} |")
    return "\n".join(lines)


def thresholds(frame: pd.DataFrame, evaluation: Evaluation, fit: np.ndarray) -> dict[str, dict[str, float]]:
    """Urgent thresholded on isotonic-calibrated probabilities: the cost rule and the best F1 of the fit
    half, each measured on the held-out half (notebook 03's threshold cell)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        calibrated = evaluation.recalibrate("isotonic", fit=fit)["urgent"].transform(frame)
    sweep = gwlab.evaluate(calibrated[fit], truth="urgent", prob="urgent").thresholds["urgent"]
    best_f1 = float(sweep.loc[sweep["f1"].idxmax(), "threshold"])
    cost = 1 / (1 + COST_RATIO)
    raw_share = float((frame.loc[~fit, "urgent__noul"] >= cost).mean())
    out = {name: _at(calibrated[~fit], t) for name, t in (("cost 4:1", cost), ("best F1 on fit half", best_f1))}
    out["uncalibrated at the cost threshold"] = {"threshold": cost, "escalated": raw_share}
    return out


def splits(evaluation: Evaluation, seeds: range = range(10)) -> str:
    """How often each map lowers the held-out ECE over other random halves: one split is an anecdote."""
    lines = ["| question | temperature lowers held-out ECE | isotonic lowers held-out ECE |", "|---|---|---|"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        runs = {m: [evaluation.recalibrate(m, fit=0.5, seed=s) for s in seeds] for m in ("temperature", "isotonic")}
    for qid in runs["temperature"][0]:
        cells = []
        for method in ("temperature", "isotonic"):
            fits = [run[qid] for run in runs[method]]
            lower = sum(f.ece_after < f.ece_before for f in fits)
            cells.append(f"{lower} of {len(fits)} (median {np.median([f.ece_before for f in fits]):.3f} -> "
                         f"{np.median([f.ece_after for f in fits]):.3f})")
        lines.append(f"| {qid} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def _at(frame: pd.DataFrame, threshold: float) -> dict[str, float]:
    said, truth = frame["urgent__noul"] >= threshold, frame["urgent"].astype(bool)
    return {"threshold": threshold, "escalated": float(said.mean()),
            "recall": float((said & truth).sum() / truth.sum()),
            "precision": float((said & truth).sum() / max(said.sum(), 1))}


def report(gateway: gwlab.Gateway) -> str:
    """Everything the page states, as text."""
    return report_of(*answers(gateway))


def report_of(frame: pd.DataFrame, questions: dict[str, Any]) -> str:
    """The page's text from the model's answers (evaluation_spread.py perturbs them first)."""
    evaluation = gwlab.evaluate(frame, truth={q: q for q in questions}, questions=questions)
    fit = np.random.default_rng(0).random(len(frame)) < 0.5
    table = recalibration_table(evaluation, fit)
    refund = frame["refund"].astype(bool).mean()
    lines = [f"rows: {len(frame)}; refund true in {refund:.0%} of rows (always answering no: {1 - refund:.0%} "
             f"accurate); fitted on {int(fit.sum())} rows, measured on {int((~fit).sum())}", "",
             markdown(table, evaluation), ""]
    for name, figures in thresholds(frame, evaluation, fit).items():
        lines.append(f"urgent, {name}: " + ", ".join(
            f"{k} {v:.0%}" if k in ("escalated", "recall") else f"{k} {v:.2f}" for k, v in figures.items()))
    lines += ["", splits(evaluation)]
    return "\n".join(lines)


# A figure as printed (with decimals, a percentage or a whole number), and on the page its tolerance:
# "0.031 ±0.030", "23% ±12" (evaluation_spread.py measures them; a figure without one is exact)
FIGURE = re.compile(r"(\d+(?:\.\d+)?)(%?)(?: ±(\d+(?:\.\d+)?))?")


def figures(line: str) -> tuple[str, list[tuple[float, float | None]]]:
    """A line as its wording (every figure and tolerance masked as #) and its figures as (value, tolerance)."""
    found = [(float(m[1]), float(m[3]) if m[3] else None) for m in FIGURE.finditer(line)]
    return FIGURE.sub(lambda m: "#" + m[2], line), found


def main() -> int:
    with gwlab.connect() as gateway:
        print(report(gateway))
    return 0


if __name__ == "__main__":
    sys.exit(main())
