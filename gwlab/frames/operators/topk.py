"""`df.gw.topk`: the `k` rows that best meet a criterion, a score per row then comparisons around the cut."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.operators.shared import (
    OperatorFrame,
    OperatorSummary,
    check_text,
    finish,
    inner,
    next_run,
    texts,
)
from gwlab.frames.run.config import RunConfig
from gwlab.frames.specs import DecideSpec
from gwlab.wire.limits import MAX_QUESTIONS, MAX_SCORE_LEVELS, MIN_SCORE_LEVELS

__all__ = ["TopkSpec", "score_levels", "topk"]

DEFAULT_STRENGTHS = ("not at all", "somewhat", "very much")


def score_levels(criterion: str, levels: Sequence[str] | None) -> list[str]:
    """The score question's levels, lowest first: the user's, or the criterion at three strengths (a
    decision model reads each level as a text to match, so a level names what it describes)."""
    if levels is None:
        return [f"{strength}: {criterion}" for strength in DEFAULT_STRENGTHS]
    if isinstance(levels, str) or not (MIN_SCORE_LEVELS <= len(levels) <= MAX_SCORE_LEVELS) or \
            not all(isinstance(level, str) and level.strip() for level in levels):
        raise InvalidRequest("levels", f"{MIN_SCORE_LEVELS} to {MAX_SCORE_LEVELS} non-empty texts, lowest first; "
                                       f"got {levels!r}")
    return list(levels)


@dataclass(frozen=True)
class TopkSpec:
    """A topk's settings beyond the run options (`k` is checked against the frame's length when run)."""

    criterion: str
    k: int
    state: Any = None  # default: every column, as a JSON object
    window: int = 2
    levels: Sequence[str] | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        check_text(self.criterion, "criterion")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 0:
            raise InvalidRequest("window", f"must be a non-negative integer; got {self.window!r}")


async def topk(frame: pd.DataFrame, topk_spec: TopkSpec, config: RunConfig) -> OperatorFrame:
    """The `k` rows that best meet `criterion`: a score per row, then comparisons around the cut."""
    criterion, k, window, model = topk_spec.criterion, topk_spec.k, topk_spec.window, topk_spec.model
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(frame):
        raise InvalidRequest("k", f"must be an integer from 1 to the frame's {len(frame)} rows; got {k!r}")
    levels = score_levels(criterion, topk_spec.levels)
    own = inner(config)
    spec = list(frame.columns) if topk_spec.state is None else topk_spec.state
    question = {"score": {"type": "score", "instructions": criterion, "criteria": levels}}
    answers = await DecideSpec(spec, question, model).run(frame, own)
    summary = OperatorSummary("topk", rows=len(frame))
    summary.add(answers.run)
    score = answers[tidy.column("score", tidy.SCORE)].to_numpy(dtype=float)
    order = [int(i) for i in np.argsort(-np.nan_to_num(score, nan=-np.inf), kind="stable")]
    near = order[max(0, k - window): k + window]
    wins = np.full(len(frame), np.nan)
    if len(near) > 1:
        row_texts, _ = texts(frame, spec, "state", config.failures.blank)
        wins[near] = await _compare(near, row_texts, criterion, model, own, summary)
        ranked_near = sorted(near, key=lambda i: (-wins[i], order.index(i)))
        order = order[: max(0, k - window)] + ranked_near + order[k + window:]
    chosen = order[:k]
    added = pd.DataFrame({"score": score, "wins": wins}).iloc[chosen]
    added["rank"] = np.arange(1, k + 1)
    out = finish(frame.iloc[chosen], added, config)
    return OperatorFrame.of(out, summary, pd.DataFrame(answers))


async def _compare(near: list[int], row_texts: list[str | None], criterion: str, model: str | None,
                   own: RunConfig, summary: OperatorSummary) -> np.ndarray:
    """Every pair of the rows near the cut as a choice "which better meets it", packed as questions of
    as few requests as the question limit allows; each row's expected wins."""
    pairs = [(a, b) for x, a in enumerate(near) for b in near[x + 1:]]
    wins = dict.fromkeys(near, 0.0)
    for start in range(0, len(pairs), MAX_QUESTIONS):
        batch = pairs[start: start + MAX_QUESTIONS]
        questions = {f"c{start + n}": {"type": "choice", "instructions": "Which of the two better meets it?",
                                       "criteria": {"a": str(row_texts[a]), "b": str(row_texts[b])}}
                     for n, (a, b) in enumerate(batch)}
        frame = pd.DataFrame({"criterion": [criterion]})
        answers = await DecideSpec("{criterion}", questions, model).run(frame, next_run(own, summary))
        summary.add(answers.run)
        for n, (a, b) in enumerate(batch):
            p = float(answers[tidy.probability(f"c{start + n}", "a")].iloc[0])
            if not math.isnan(p):
                wins[a] += p
                wins[b] += 1 - p
    summary.comparisons += len(pairs)
    return np.array([wins[i] for i in near])
