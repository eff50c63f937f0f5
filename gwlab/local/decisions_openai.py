"""The local gateway's side of OpenAI's decisions shape (protocols.md §7.8): an OpenAI-shape request
in, a System One body out, and the System One answer back in the shape it was asked in.

Server-only, so it lives beside its only user, the decisions route (gwlab/local/routes/decisions.py),
not in `gwlab.wire`, which carries what both sides share. It validates with System One's own rules
and messages (`gwlab.wire.decisions`), naming fields in the OpenAI shape (`questions.1.choices`). The
client translates in the opposite directions in `gwlab.wire.decisions_openai`; both use the one
choice-key rule (`wire.decisions.choice_key`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire.decisions import (
    MISSING,
    blank_free,
    check_stream,
    checked_model,
    choice_key,
    kind_of,
    listed,
    render_state,
    scalar,
    show_value,
)
from gwlab.wire.limits import (
    MAX_CHOICE_OPTIONS,
    MAX_OPENAI_QUESTIONS,
    MAX_SCORE_LEVELS,
    MIN_CHOICE_OPTIONS,
    MIN_SCORE_LEVELS,
    OPENAI_QUESTION_TYPES,
)

__all__ = ["OpenAIQuestion", "is_openai_shape", "openai_to_system_one", "system_one_to_openai_response"]


@dataclass(frozen=True, slots=True)
class OpenAIQuestion:
    """Where one OpenAI-shape question went in System One, so its answer can go back in its shape."""

    name: str  # the caller's name, or a generated one; also its System One question id
    type: str  # predicate | choice | score
    # choice: the original values (strings or booleans), in order; score: the level labels, in order
    values: tuple[Any, ...] = ()


def is_openai_shape(body: Any) -> bool:
    """Whether a /v1/decisions body is OpenAI's (`input` + a `questions` array) rather than System One's."""
    if not isinstance(body, Mapping):
        return False
    return isinstance(body.get("questions"), list) or ("input" in body and "state" not in body)


def openai_to_system_one(body: Any) -> tuple[dict[str, Any], list[OpenAIQuestion]]:
    """The System One body for an OpenAI-shape request, and the order to answer in.

    Raises only `InvalidRequest`, naming the field in the OpenAI shape (`questions.1.choices`).
    predicate→noul, choices[].value→criteria keys (booleans as "true"/"false"), levels[].label→criteria
    list (a level's description, when given, is appended to its label: the engine reads the text).
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("", f"the body must be a JSON object; got {kind_of(body)}")
    check_stream(body.get("stream"))
    model = checked_model(body.get("model", MISSING))
    state = _input_state(body.get("input", MISSING))
    items = body.get("questions", MISSING)
    if not isinstance(items, list):
        got = "nothing" if items is MISSING else kind_of(items)
        raise InvalidRequest("questions", f"must be an array of questions; got {got}")
    if not 1 <= len(items) <= MAX_OPENAI_QUESTIONS:
        raise InvalidRequest("questions", f"takes 1 to {MAX_OPENAI_QUESTIONS} questions; got {len(items)}")
    given = [item.get("name") for item in items if isinstance(item, Mapping)]
    used = {name for name in given if isinstance(name, str)}
    order: list[OpenAIQuestion] = []
    questions: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        slot, question = _openai_question(item, f"questions.{index}", index, used)
        if slot.name in questions:
            raise InvalidRequest(f"questions.{index}.name", f"duplicate question name {show_value(slot.name)}")
        order.append(slot)
        questions[slot.name] = question
    return {"model": model, "state": state, "questions": questions}, order


_OPENAI_FIELDS = {"predicate": ("type", "name", "instructions"),
                  "choice": ("type", "name", "instructions", "choices"),
                  "score": ("type", "name", "instructions", "levels")}


def _openai_question(
    item: Any, path: str, index: int, used: set[str]
) -> tuple[OpenAIQuestion, dict[str, Any]]:
    if not isinstance(item, Mapping):
        raise InvalidRequest(path, f"must be a question object; got {kind_of(item)}")
    qtype = item.get("type")
    if not isinstance(qtype, str) or qtype not in OPENAI_QUESTION_TYPES:
        kinds = listed(OPENAI_QUESTION_TYPES)
        raise InvalidRequest(f"{path}.type", f"must be one of {kinds}; got {show_value(qtype)}")
    for key in item:
        if key not in _OPENAI_FIELDS[qtype]:
            raise InvalidRequest(f"{path}.{key}", f"unknown field for a {qtype} question")
    name = item.get("name")
    if name is None:
        name = f"q{index}"
        while name in used:
            name += "_"
        used.add(name)
    elif not blank_free(name):
        raise InvalidRequest(f"{path}.name", f"must be a non-empty string; got {show_value(name)}")
    instructions = item.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest(f"{path}.instructions", f"must be a string; got {kind_of(instructions)}")
    question: dict[str, Any] = {"type": "noul" if qtype == "predicate" else qtype}
    if instructions is not None:
        question["instructions"] = instructions
    values: tuple[Any, ...] = ()
    if qtype == "predicate" and not blank_free(instructions):
        raise InvalidRequest(f"{path}.instructions", "a predicate question needs instructions")
    if qtype == "choice":
        question["criteria"], values = _openai_choices(item.get("choices"), f"{path}.choices")
    elif qtype == "score":
        question["criteria"], values = _openai_levels(item.get("levels"), f"{path}.levels")
    return OpenAIQuestion(name, qtype, values), question


def _entries(value: Any, path: str, low: int, high: int, what: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        raise InvalidRequest(path, f"must be an array of {what}; got {kind_of(value)}")
    if not low <= len(value) <= high:
        raise InvalidRequest(path, f"takes {low} to {high} {what}; got {len(value)}")
    for index, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise InvalidRequest(f"{path}.{index}", f"must be an object; got {kind_of(entry)}")
        description = entry.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidRequest(f"{path}.{index}.description", f"must be a string; got {kind_of(description)}")
    return value


def _openai_choices(value: Any, path: str) -> tuple[dict[str, str | None], tuple[Any, ...]]:
    entries = _entries(value, path, MIN_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS, "choices")
    criteria: dict[str, str | None] = {}
    for index, entry in enumerate(entries):
        raw = entry.get("value")
        if not isinstance(raw, bool) and not blank_free(raw):
            raise InvalidRequest(f"{path}.{index}.value",
                                 f"must be a non-empty string or a boolean; got {show_value(raw)}")
        key = choice_key(raw)
        if key in criteria:
            raise InvalidRequest(f"{path}.{index}.value", f"duplicate choice {key!r}; values must be unique")
        criteria[key] = entry.get("description")
    return criteria, tuple(entry["value"] for entry in entries)


def _openai_levels(value: Any, path: str) -> tuple[list[str], tuple[str, ...]]:
    entries = _entries(value, path, MIN_SCORE_LEVELS, MAX_SCORE_LEVELS, "levels")
    for index, entry in enumerate(entries):
        label = entry.get("label")
        if not blank_free(label):
            raise InvalidRequest(f"{path}.{index}.label", f"must be a non-empty string; got {show_value(label)}")
    labels = tuple(entry["label"] for entry in entries)
    texts = [f"{entry['label']}: {entry['description']}" if entry.get("description") else entry["label"]
             for entry in entries]
    return texts, labels


def _input_state(value: Any) -> str:
    """OpenAI `input` as one text: a string as given, items as `role: text` lines."""
    if value is MISSING:
        raise InvalidRequest("input", "required: a string or an array of input items")
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidRequest("input", f"must be a string or an array of input items; got {kind_of(value)}")
    lines = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidRequest(f"input.{index}", f"must be an input item object; got {kind_of(item)}")
        lines.append(_item_text(item))
    return "\n".join(lines)


def _item_text(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if "role" in item and kind in (None, "message"):
        return f"{_scalar_text(item.get('role'))}: {_content_text(item.get('content'))}"
    if kind in ("function_call", "custom_tool_call"):
        payload = item.get("arguments", item.get("input"))
        return f"{kind} {_scalar_text(item.get('name'))}: {_scalar_text(payload)}"
    if kind in ("function_call_output", "custom_tool_call_output"):
        return f"{kind}: {_content_text(item.get('output'))}"
    return render_state(dict(item))


def _content_text(content: Any) -> str:
    if not isinstance(content, list):
        return _scalar_text(content)
    pieces = []
    for part in content:
        if not isinstance(part, Mapping):
            pieces.append(_scalar_text(part))
        elif isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif part.get("type") == "input_json":
            pieces.append(render_state(part.get("data")) if isinstance(part.get("data"), Mapping | list)
                          else _scalar_text(part.get("data")))
        elif isinstance(part.get("refusal"), str):
            pieces.append(part["refusal"])
        else:
            pieces.append(f"[{_scalar_text(part.get('type'))}]")  # an image or file: named, not described
    return " ".join(pieces)


def _scalar_text(value: Any) -> str:
    if isinstance(value, Mapping | list | tuple):
        return render_state(value)
    return scalar(value)


def system_one_to_openai_response(
    answers: Mapping[str, Any], order: Sequence[OpenAIQuestion], usage: Mapping[str, Any] | int, model: str
) -> dict[str, Any]:
    """The OpenAI-shape response for System One `answers`, in the request's question order.

    A question without an answer becomes `{"type": "refusal", "name": ...}`, the shape's own way to say so.
    """
    usage_in = usage if isinstance(usage, Mapping) else {"input_tokens": usage}
    input_tokens = int(usage_in.get("input_tokens") or 0)
    output_tokens = int(usage_in.get("output_tokens") or 0)
    return {
        "model": model,
        "answers": [_openai_answer(slot, answers.get(slot.name)) for slot in order],
        "usage": {"input_tokens": input_tokens,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": output_tokens,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": input_tokens + output_tokens},
    }


def _openai_answer(slot: OpenAIQuestion, answer: Any) -> dict[str, Any]:
    if not isinstance(answer, Mapping):
        return {"type": "refusal", "name": slot.name}
    if slot.type == "predicate":
        return {"type": "predicate", "name": slot.name, "probability": answer.get("noul")}
    probabilities = answer.get("probabilities") or {}
    if slot.type == "choice":
        by_key = {choice_key(value): value for value in slot.values}
        return {"type": "choice", "name": slot.name,
                "choice": by_key.get(choice, choice) if isinstance(choice := answer.get("choice"), str) else choice,
                "confidence": answer.get("confidence"),
                "probabilities": [{"value": value, "probability": probabilities.get(key, 0.0)}
                                  for key, value in by_key.items()]}
    return {"type": "score", "name": slot.name, "score": answer.get("score"),
            "confidence": answer.get("confidence"),
            "probabilities": [{"value": level, "label": label,
                               "probability": probabilities.get(str(level), 0.0)}
                              for level, label in enumerate(slot.values)]}
