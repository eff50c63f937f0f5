"""`make demo`: the main job on the embedded local gateway, end to end, with no account and no network.

It starts the local gateway, asks the project's hand-written labelled support messages four packed
questions each (`df.gw.decide`), evaluates the answers against the labels, recalibrates the
probabilities on half of the rows, asks the text model one question, and writes a CSV, the
evaluation and the plots to `out/`. Then it prints the headline figures.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

import gwlab

DATA = Path(__file__).resolve().parent.parent / "bench" / "data"
OUT = Path(os.environ.get("GWLAB_OUT", "out"))
TEXT_MODEL = "local/gemma-3-270m"
DECIDE_MODEL = "local/decide-e5-small"


def load() -> tuple[pd.DataFrame, dict]:
    rows = [json.loads(line) for line in (DATA / "decisions_labelled.jsonl").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    questions = json.loads((DATA / "decisions_questions.json").read_text())
    return pd.DataFrame(rows).set_index("id"), questions


def main() -> None:
    started = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    frame, questions = load()
    with gwlab.connect(env={}) as gw:  # env={}: always the embedded gateway, even if a hosted one is set
        answers = frame.gw.decide("{text}", questions, model=DECIDE_MODEL, gateway=gw,
                                  checkpoint=OUT / "checkpoint.sqlite", progress=False)
        answers.to_csv(OUT / "answers.csv")
        truth = {"urgent": "urgent", "refund": "refund", "team": "team", "severity": "severity"}
        evaluation = gwlab.evaluate(answers, truth=truth)
        calibrated = evaluation.recalibrate("temperature", fit=0.5)
        chat = gw.chat([{"role": "user", "content": "What is the capital of France?"}], model=TEXT_MODEL,
                       max_tokens=12)
        usage = gw.usage
    _plots(evaluation, answers)
    evaluation.metrics.to_csv(OUT / "evaluation.csv")
    elapsed = time.perf_counter() - started
    print(f"\ngwlab demo on the embedded local gateway: {len(answers)} rows x {len(questions)} questions")
    shown = evaluation.metrics[["type", "accuracy", "macro_f1", "ece"]]
    print(shown.to_string(float_format="{:.3f}".format))
    for q, cal in calibrated.items():
        print(f"  {q}: ECE {cal.ece_before:.3f} -> {cal.ece_after:.3f} after temperature scaling "
              f"(T={cal.temperature:.2f}, fitted on {cal.n_fit} rows, measured on {cal.n_test})")
    print(f"chat ({TEXT_MODEL}): {chat.text.strip()!r}")
    print(f"tokens: {int(usage['input_tokens'].fillna(0).sum())} in, "
          f"{int(usage['output_tokens'].fillna(0).sum())} out over {len(usage)} requests; "
          f"elapsed {elapsed:.1f} s; results in {OUT}/")


def _plots(evaluation: gwlab.frames.evaluate.Evaluation, answers: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gwlab import plots

    for question in evaluation.reliability:
        ax = plots.reliability(evaluation, question)
        ax.figure.savefig(OUT / f"reliability_{question}.png", dpi=100, bbox_inches="tight")
        plt.close(ax.figure)
    ax = plots.confusion(evaluation, "team")
    ax.figure.savefig(OUT / "confusion_team.png", dpi=100, bbox_inches="tight")
    plt.close(ax.figure)


if __name__ == "__main__":
    main()
