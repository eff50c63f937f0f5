"""A System One question asked of a text model: the words of its prompt and the answers it may give.

A cascade's oracle may be a chat, responses or messages model (`gwlab/frames/cascade/oracle.py`). It
is asked the question the decision model was asked, in words, and its answer is held by a schema to
the question's outcomes: true or false, an option's label, a level's number (levels count from 0, as
a score's `level` does). So nothing the model writes has to be parsed by guessing, and an answer
outside the outcomes is invalid (re-asked, then missing), never mapped to the nearest outcome.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gwlab.wire.decisions import Question, to_question

__all__ = ["ANSWER_FIELD", "answer_schema", "question_prompt"]

ANSWER_FIELD = "answer"


def question_prompt(state_text: str, question: Mapping[str, Any] | Question, qid: str = "question") -> str:
    """The prompt asking `question` about `state_text`, ending with what the answer may be."""
    q = to_question(question, qid)
    lines = [state_text, "", f"Question: {q.instructions or _stem(q)}"]
    criteria = q.criteria or {}  # validated: a mapping for noul and choice, the levels for score
    if q.type == "noul":
        assert isinstance(criteria, Mapping)
        lines += [f"It is {value} when: {text}" for value, text in criteria.items() if text]
        lines.append(f'Answer "{ANSWER_FIELD}": true or false.')
    elif q.type == "choice":
        assert isinstance(criteria, Mapping)
        lines += ["Options:", *(f"- {label}" + (f": {text}" if text else "") for label, text in criteria.items())]
        lines.append(f'Answer "{ANSWER_FIELD}": the label of the one option that fits best.')
    else:
        lines += ["Levels:", *(f"{level}: {text}" for level, text in enumerate(criteria))]
        lines.append(f'Answer "{ANSWER_FIELD}": the number of the one level that fits best.')
    return "\n".join(lines)


def answer_schema(question: Mapping[str, Any] | Question, qid: str = "question") -> dict[str, Any]:
    """`{ANSWER_FIELD: type}` as `df.gw.extract` takes it: bool, the options' labels, the levels' numbers."""
    q = to_question(question, qid)
    if q.type == "noul":
        return {ANSWER_FIELD: bool}
    criteria = q.criteria or ()  # validated: the options' mapping for choice, the levels for score
    if q.type == "choice":
        return {ANSWER_FIELD: list(criteria)}
    return {ANSWER_FIELD: list(range(len(criteria)))}


def _stem(q: Question) -> str:
    """A question without instructions is asked by its outcomes (the spec lets a noul be described by
    them alone), which the lines after the stem list."""
    return "Which of the outcomes below holds?"
