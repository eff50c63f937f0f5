"""The tidy-column vocabulary of the pandas layer, written once: how an answer's columns are named, how a
name is read back, and the probability at which a yes/no answer reads as yes.

A decided question `q` gives `{q}__noul` (yes/no probability), or `{q}__choice` / `{q}__score` and
`{q}__level`, with `{q}__p__{option}` per option or level and `{q}__confidence`; a cascade adds
`{q}__answer`, `{q}__source` and `{q}__proxy_score`; `repeats=` adds `{column}__std`. Every module that
writes or reads such a column asks this one, so a name is never spelled twice. Pure: no pandas, and
nothing of wire (wire's `DecisionResult.to_record()` asks `decision_record` here for its names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gwlab.errors import InvalidRequest

__all__ = [
    "AGREEMENT",
    "ANSWER",
    "CHOICE",
    "CONFIDENCE",
    "CUT",
    "DECIDED",
    "LEVEL",
    "NOUL",
    "PROBABILITY",
    "PROXY_SCORE",
    "SCORE",
    "SEP",
    "SOURCE",
    "STD",
    "column",
    "decision_record",
    "is_probability",
    "options_of",
    "probability",
    "probability_prefix",
    "question_of",
    "reads_yes",
    "refuse_clash",
    "split_probability",
]

SEP = "__"  # between a question id and what the column holds
CUT = 0.5  # a yes/no probability at or above it reads as yes (a filter's, an agreement's, a vote's default)

NOUL, CHOICE, SCORE, LEVEL, CONFIDENCE = "noul", "choice", "score", "level", "confidence"
ANSWER, SOURCE, PROXY_SCORE = "answer", "source", "proxy_score"  # a cascade's
PROBABILITY = "p"  # `{q}__p__{option}`
STD = "std"  # `{column}__std`: a spread over repeats
AGREEMENT = "agreement"  # `{q}__agreement`: the share of repeats that gave the most common answer
DECIDED = (NOUL, CHOICE, LEVEL)  # the columns that hold the decision a question made


def column(question: str, field: str) -> str:
    """`{question}__{field}`: `column("urgent", NOUL)` is `urgent__noul`."""
    return f"{question}{SEP}{field}"


def probability_prefix(question: str) -> str:
    """`{question}__p__`: every option's probability column starts with it."""
    return f"{question}{SEP}{PROBABILITY}{SEP}"


def probability(question: str, option: str) -> str:
    """`{question}__p__{option}`."""
    return f"{probability_prefix(question)}{option}"


def options_of(question: str, names: Iterable[object]) -> list[str]:
    """The options of `question` whose probability columns are among `names`, in their order (not the
    spreads `repeats=` adds, `{q}__p__{option}__std`)."""
    prefix, spread = probability_prefix(question), f"{SEP}{STD}"
    return [str(n).removeprefix(prefix) for n in names if str(n).startswith(prefix) and not str(n).endswith(spread)]


def is_probability(name: str) -> bool:
    """Whether a column holds one option's probability (`{q}__p__{option}`)."""
    return f"{SEP}{PROBABILITY}{SEP}" in name


def split_probability(name: str) -> tuple[str, str]:
    """(question, option) of `{q}__p__{option}`."""
    question, option = name.rsplit(f"{SEP}{PROBABILITY}{SEP}", 1)
    return question, option


def question_of(name: str, *fields: str) -> str | None:
    """The question id of `{q}__{field}` for one of `fields`, or None when the name ends in none of them."""
    for field in fields:
        if name.endswith(f"{SEP}{field}"):
            return name[: -len(field) - len(SEP)]
    return None


def reads_yes(p: float) -> bool:
    """A yes/no probability read as the decision it makes (`CUT`)."""
    return p >= CUT


def decision_record(answers: Mapping[str, Any]) -> dict[str, Any]:
    """One flat row of tidy columns from a decision result's answers (question id -> answer with a `type`
    of noul, choice or score). An answer of an unknown type adds no column."""
    record: dict[str, Any] = {}
    for qid, answer in answers.items():
        kind = getattr(answer, "type", None)
        if kind == NOUL:
            record[column(qid, NOUL)] = answer.noul
        elif kind in (CHOICE, SCORE):
            record[column(qid, kind)] = answer.value
            if kind == SCORE:
                record[column(qid, LEVEL)] = answer.level
            record.update({probability(qid, key): p for key, p in answer.probabilities.items()})
            record[column(qid, CONFIDENCE)] = answer.confidence
    return record


def refuse_clash(existing: Iterable[object], added: Iterable[str], *, prefix: str = "", join: bool = True) -> None:
    """The one column-clash check, before anything is sent (not after the run has been paid for): with
    `join`, no added column (after `prefix`) may already be among the frame's `existing` columns."""
    if not join:
        return
    have = set(existing)
    clash = [f"{prefix}{name}" for name in added if f"{prefix}{name}" in have]
    if clash:
        raise InvalidRequest("prefix", f"the frame already has column {clash[0]!r}; pass prefix='...' or join=False")
