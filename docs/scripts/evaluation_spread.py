"""docs/evaluation.md's figures with their tolerances: how far each moves when the model's probabilities
move in the third decimal, as they do between CPUs (issue 22). The page's lines are pasted from this
output; tests/test_evaluation_doc.py compares a fresh evaluation_table.py run with them, within them.

    .venv/bin/python docs/scripts/evaluation_spread.py [draws]

The decision model's answers are asked once (as evaluation_table.py asks them); then each draw adds
N(0, SIGMA) noise to every answer's log-odds (yes/no) or log-probabilities (choice, score), renormalises,
re-derives the choice (argmax), the score (expected level) and the confidence, and recomputes the page.
A figure's tolerance is twice its largest change over the draws, at least one unit of its last digit; a
line none of whose figures moved (the data's own counts) stays exact, as do whole numbers (rows, options).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
import pandas as pd
from evaluation_table import FIGURE, answers, figures, report_of  # beside this script (sys.path[0] when run)

import gwlab

SIGMA = 0.01  # moves a probability near 0.5 by ~0.0025: the third decimal, as between CPUs (issue 22)


def perturbed(frame: pd.DataFrame, questions: dict[str, Any], rng: np.random.Generator) -> pd.DataFrame:
    """The answers with noise on their log-probabilities, every derived column re-derived."""
    out = frame.copy()
    for qid, question in questions.items():
        if question["type"] == "noul":
            p = np.clip(out[f"{qid}__noul"].to_numpy(float), 1e-9, 1 - 1e-9)
            z = np.log(p) - np.log1p(-p) + rng.normal(0, SIGMA, len(p))
            out[f"{qid}__noul"] = 1 / (1 + np.exp(-z))
            continue
        columns = [c for c in out.columns if c.startswith(f"{qid}__p__")]
        noise = rng.normal(0, SIGMA, (len(out), len(columns)))
        logp = np.log(np.clip(out[columns].to_numpy(float), 1e-12, None)) + noise
        p = np.exp(logp - logp.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out[columns] = p
        labels = np.array([c.removeprefix(f"{qid}__p__") for c in columns], dtype=object)
        if question["type"] == "choice":
            out[f"{qid}__choice"] = labels[p.argmax(axis=1)]
        else:
            out[f"{qid}__score"] = p @ labels.astype(float)
        out[f"{qid}__confidence"] = 1 + (p * np.log(np.clip(p, 1e-300, None))).sum(axis=1) / np.log(len(columns))
    return out


def with_tolerances(base: str, draws: list[str]) -> str:
    """The base report, each figure that depends on the model followed by its tolerance."""
    lines = []
    for i, line in enumerate(base.splitlines()):
        changes = np.zeros(len(figures(line)[1]))
        for other in draws:
            wording, found = figures(other.splitlines()[i])
            if wording != figures(line)[0]:
                raise AssertionError(f"a line's wording changed under noise: {line!r} -> {other.splitlines()[i]!r}")
            changes = np.maximum(changes, np.abs(np.subtract([v for v, _ in found], [v for v, _ in figures(line)[1]])))
        lines.append(_annotated(line, changes) if changes.any() else line)
    return "\n".join(lines)


def _annotated(line: str, changes: np.ndarray) -> str:
    matches = list(FIGURE.finditer(line))
    for match, change in zip(reversed(matches), reversed(changes), strict=True):
        text = match[0]
        decimals = len(text.split(".")[1]) if "." in text else 0
        counts = line.startswith(" of ", match.end())
        if decimals == 0 and not match[2] and not counts:
            continue  # a whole number other than "n of 10" (rows, options): structure, exact
        unit = 10.0 ** -decimals
        tolerance = max(np.ceil(round(2 * change / unit, 6)) * unit, unit)
        line = f"{line[:match.end()]} ±{tolerance:.{decimals}f}{line[match.end():]}"
    return line


def main(draws: int = 20) -> int:
    with gwlab.connect() as gateway:
        frame, questions = answers(gateway)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = report_of(frame, questions)
        noisy = [perturbed(frame, questions, rng) for _ in range(draws)]
        reports = [report_of(n, questions) for n in noisy]
    columns = [c for c in frame.columns if "__p__" in c or c.endswith("__noul")]
    moved = np.concatenate([np.abs(n[columns].to_numpy(float) - frame[columns].to_numpy(float)).ravel() for n in noisy])
    print(f"{draws} draws, SIGMA {SIGMA}: probabilities moved by median {np.median(moved):.4f}, "
          f"99th percentile {np.quantile(moved, 0.99):.4f}, at most {moved.max():.4f}\n")
    print(with_tolerances(base, reports))
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
