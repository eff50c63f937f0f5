"""The client's side of OpenAI's decisions shape: a System One request out, a System One answer back.

Some gateways (LiteLLM's proxy) serve `/v1/decisions` in OpenAI's shape (protocols.md §7.8: `input` +
an ordered `questions` list) rather than the spec's System One shape. gwlab always builds and
validates a System One body (`wire.decisions.build_request`); when the dialect says so, the transport
translates it here on the way out and translates the answer back, so every caller keeps one typed
result. Pure: no I/O.

The local gateway translates in the opposite directions (`gwlab.local.decisions_openai`:
`openai_to_system_one` and `system_one_to_openai_response`); both sides share the mapping's one
piece of field knowledge, the choice-key rule (`choice_key`), and the same correspondence:
noul↔predicate, criteria keys↔choices values, criteria list↔levels labels, map keys↔list order
(each question's id travels as its `name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gwlab.wire.decisions import choice_key, render_state

__all__ = ["from_openai_response", "to_openai_request"]

_TYPES = {"noul": "predicate", "choice": "choice", "score": "score"}


def to_openai_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's decisions body for a validated System One `body`; question ids become `name`s.

    A noul question without instructions asks its described `true` outcome (a predicate needs
    instructions); a JSON state travels as its text rendering, which is what an engine reads anyway.
    """
    state = body["state"]
    out: dict[str, Any] = {key: value for key, value in body.items() if key not in ("state", "questions")}
    out["input"] = state if isinstance(state, str) else render_state(state)
    out["questions"] = [_question(qid, q) for qid, q in body["questions"].items()]
    return out


def _question(qid: str, question: Mapping[str, Any]) -> dict[str, Any]:
    kind = question["type"]
    instructions = question.get("instructions")
    criteria = question.get("criteria") or {}  # validated: a mapping for noul and choice, the levels for score
    out: dict[str, Any] = {"type": _TYPES.get(kind, kind), "name": qid}
    if kind == "noul" and not instructions and isinstance(criteria, Mapping):
        instructions = criteria.get("true") or f"The opposite of: {criteria.get('false')}"
    if instructions is not None:
        out["instructions"] = instructions
    if kind == "choice":
        out["choices"] = [{"value": label, **({"description": text} if text else {})}
                          for label, text in criteria.items()]
    elif kind == "score":
        out["levels"] = [{"label": text} for text in criteria]
    return out


def from_openai_response(data: Any, request: Mapping[str, Any]) -> Any:
    """The System One answer body for OpenAI's answer `data` to the System One `request`.

    Answers are matched by `name`, else by position; a `refusal` (or a missing answer) is kept as
    `{"type": "refusal"}` so the typed result shows it as an unknown answer instead of dropping it.
    Anything that is not an OpenAI-shape answer (already keyed answers) is returned unchanged.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("answers"), list):
        return data
    questions = request["questions"]
    given = [a for a in data["answers"] if isinstance(a, Mapping)]
    by_name = {a.get("name"): a for a in given if isinstance(a.get("name"), str)}
    answers = {}
    for index, (qid, question) in enumerate(questions.items()):
        answer = by_name.get(qid, given[index] if index < len(given) and not by_name else None)
        answers[qid] = _answer(question, answer)
    return {**data, "answers": answers}


def _answer(question: Mapping[str, Any], answer: Mapping[str, Any] | None) -> dict[str, Any]:
    if answer is None or answer.get("type") == "refusal":
        return {"type": "refusal"}
    kind = question["type"]
    if kind == "noul":
        return {"type": "noul", "noul": answer.get("probability")}
    probabilities = [p for p in answer.get("probabilities") or () if isinstance(p, Mapping)]
    if kind == "choice":
        choice = answer.get("choice")
        return {"type": "choice", "choice": choice_key(choice) if choice is not None else None,
                "confidence": answer.get("confidence"),
                "probabilities": {choice_key(p.get("value")): p.get("probability") for p in probabilities}}
    levels = question.get("criteria") or []
    return {"type": "score", "score": answer.get("score"), "confidence": answer.get("confidence"),
            "legend": {str(level): text for level, text in enumerate(levels)},
            "probabilities": {str(p.get("value")): p.get("probability") for p in probabilities}}
