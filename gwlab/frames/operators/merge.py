"""`df.gw.merge`: rows of two frames paired by a condition, as one choice per left row (a small right
side) or a condition per blocked pair, with its plan known before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.operators.blocking import Blocking, candidate_pairs, tfidf_similarity
from gwlab.frames.operators.shared import OperatorFrame, OperatorSummary, check_text, inner, texts
from gwlab.frames.run.config import RunConfig
from gwlab.frames.specs import DecideSpec
from gwlab.wire.limits import MAX_CHOICE_OPTIONS

__all__ = ["NONE_OPTION", "SMALL_RIGHT", "MergePlan", "MergeSpec", "merge", "merge_plan", "plan"]

# the small side of a merge leaves room under the choice limit: one option is "none", and a few spare
# keep a right frame that grows by a row or two on the same strategy (and the same checkpointed answers)
CHOICE_MARGIN = 5
SMALL_RIGHT = MAX_CHOICE_OPTIONS - 1 - CHOICE_MARGIN
NONE_OPTION = "none"


@dataclass(frozen=True)
class MergePlan:
    """What a merge will send, known before anything is: `requests` against asking every pair."""

    strategy: Literal["choice", "pairwise"]
    left_rows: int
    right_rows: int
    requests: int  # distinct decision requests (a checkpoint may answer some of them)
    pairwise: int  # requests if every (left, right) pair were asked
    candidates: int | None = None  # pairwise: right rows asked about per left row

    def __str__(self) -> str:
        how = ("one choice question per left row over the right rows" if self.strategy == "choice"
               else f"a condition per pair for the {self.candidates} most similar right rows per left row")
        return (f"merge {self.left_rows} x {self.right_rows} rows: {self.requests} requests ({how}); "
                f"asking every pair: {self.pairwise}")


@dataclass(frozen=True)
class MergeSpec:
    """A merge's settings beyond the run options, checked once."""

    condition: str
    left_on: Any = None
    right_on: Any = None
    how: str = "inner"
    model: str | None = None
    blocking: Blocking = field(default_factory=Blocking)

    def __post_init__(self) -> None:
        check_text(self.condition, "condition")
        if self.how not in ("inner", "left"):
            raise InvalidRequest("how", f"must be 'inner' or 'left'; got {self.how!r}")
        if not isinstance(self.blocking, Blocking):
            raise InvalidRequest("blocking", f"a gwlab Blocking(...); got {type(self.blocking).__name__}")


def merge_plan(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, config: RunConfig) -> tuple[MergePlan, Any]:
    """The plan, and what carrying it out needs (the texts and, for pairwise, the candidate pairs)."""
    if not isinstance(right, pd.DataFrame):
        raise InvalidRequest("right", f"a pandas DataFrame; got {type(right).__name__}")
    if right.empty:
        raise InvalidRequest("right", "has no rows")
    left_texts, left_errors = texts(left, spec.left_on, "left_on", config.failures.blank)
    right_texts, right_errors = texts(right, spec.right_on, "right_on", config.failures.blank)
    if right_errors:  # a right row without a description can be no option and no pair
        position, message = min(right_errors.items())
        raise InvalidRequest("right_on", f"right row {right.index[position]!r}: {message}")
    if left_errors and config.failures.errors == "raise":
        position, message = min(left_errors.items())
        raise InvalidRequest("left_on", f"row {left.index[position]!r}: {message} (errors='coerce' leaves it "
                                        "unmatched)")
    distinct = len({t for t in left_texts if t is not None})
    if len(right) <= SMALL_RIGHT:
        plan = MergePlan("choice", len(left), len(right), distinct, distinct * len(right))
        return plan, (left_texts, right_texts, None)
    m = min(spec.blocking.candidates, len(right))
    pairs = candidate_pairs(left_texts, right_texts, m, spec.blocking.similarity or tfidf_similarity)
    requests = len({(left_texts[i], right_texts[j]) for i, j in pairs})
    plan = MergePlan("pairwise", len(left), len(right), requests, distinct * len(right), m)
    return plan, (left_texts, right_texts, pairs)


def plan(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, config: RunConfig) -> MergePlan:
    """What `merge` would send, without a gateway."""
    return merge_plan(left, right, spec, config)[0]


async def merge(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, config: RunConfig) -> OperatorFrame:
    """Pair rows of `left` and `right` by `spec.condition`."""
    own = inner(config)
    plan, (left_texts, right_texts, pairs) = merge_plan(left, right, spec, config)
    summary = OperatorSummary("merge", rows=len(left), strategy=plan.strategy)
    if plan.strategy == "choice":
        matched = await _merge_by_choice(left, right_texts, spec, own, summary)
    else:
        matched = await _merge_pairwise(left_texts, right_texts, pairs, spec, own, summary)
    return OperatorFrame.of(_joined(left, right, matched, spec.how, config), summary)


async def _merge_by_choice(left: pd.DataFrame, right_texts: list[str | None], spec: MergeSpec,
                           own: RunConfig, summary: OperatorSummary) -> pd.DataFrame:
    """One choice question per left row whose options are the right rows (and "none")."""
    criteria = {f"r{j}": str(text) for j, text in enumerate(right_texts)}
    criteria[NONE_OPTION] = f"none of these: no option meets the condition ({spec.condition})"
    question = {"match": {"type": "choice", "instructions": spec.condition, "criteria": criteria}}
    state = list(left.columns) if spec.left_on is None else spec.left_on
    answers = await DecideSpec(state, question, spec.model).run(left, own)
    summary.add(answers.run)
    chosen = answers[tidy.column("match", tidy.CHOICE)].to_numpy(dtype=object)
    rows = []
    for i, option in enumerate(chosen):
        if isinstance(option, str) and option != NONE_OPTION:
            rows.append((i, int(option[1:]), float(answers[tidy.probability("match", option)].iloc[i])))
    return pd.DataFrame(rows, columns=["left", "right", "p"])


async def _merge_pairwise(left_texts: list[str | None], right_texts: list[str | None], pairs: list[tuple[int, int]],
                          spec: MergeSpec, own: RunConfig, summary: OperatorSummary) -> pd.DataFrame:
    """A noul condition per candidate pair; the pairs whose probability reaches the threshold."""
    frame = pd.DataFrame({"left": [left_texts[i] for i, _ in pairs], "right": [right_texts[j] for _, j in pairs]})
    question = {"match": {"type": "noul", "instructions": spec.condition}}
    answers = await DecideSpec(["left", "right"], question, spec.model).run(frame, own)
    summary.add(answers.run)
    p = answers[tidy.column("match", tidy.NOUL)].to_numpy(dtype=float)
    keep = p >= spec.blocking.threshold
    return pd.DataFrame({"left": [i for (i, _), k in zip(pairs, keep, strict=True) if k],
                         "right": [j for (_, j), k in zip(pairs, keep, strict=True) if k], "p": p[keep]})


def _joined(left: pd.DataFrame, right: pd.DataFrame, matched: pd.DataFrame, how: str,
            config: RunConfig) -> pd.DataFrame:
    """Left rows with their matched right rows (pandas' suffixes on clashing names), on the left's index."""
    if how == "left":
        unmatched = sorted(set(range(len(left))) - set(matched["left"]))
        extra = pd.DataFrame({"left": unmatched, "right": -1, "p": np.nan})
        matched = pd.concat([matched, extra]).sort_values("left", kind="stable")
    rights = right.iloc[matched["right"].clip(lower=0)].reset_index(drop=True)
    rights[(matched["right"] < 0).to_numpy()] = None
    lefts = left.iloc[matched["left"]]
    added = pd.DataFrame({f"{config.output.prefix}match__p": matched["p"].to_numpy(),
                          f"{config.output.prefix}right_index": right.index[matched["right"].clip(lower=0)]})
    added.loc[(matched["right"] < 0).to_numpy(), f"{config.output.prefix}right_index"] = None
    both = set(left.columns) & set(right.columns)
    rights.columns = [f"{c}_y" if c in both else c for c in rights.columns]
    if not config.output.join:
        return added.set_axis(lefts.index)
    lefts = lefts.rename(columns={c: f"{c}_x" for c in both})
    return pd.concat([lefts.reset_index(drop=True), rights, added], axis=1).set_axis(lefts.index)
