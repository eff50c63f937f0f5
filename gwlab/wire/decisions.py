"""System One decisions: one validator for both sides, typed results, and the gateway's answer body.

Strict writer, tolerant reader. `build_request` (client) and `parse_request` (local gateway) run the same
validator, so the client never sends what the gateway would refuse, and every refusal is an
`InvalidRequest` naming the field as a dotted path (`questions.team.criteria`). `parse_response` keeps
every field and answer type it does not know. The OpenAI decisions shape (protocols.md §7.8) is
translated outside: for the client in wire/decisions_openai.py, for the local gateway (server-only) in
gwlab/local/decisions_openai.py, beside its only user, the decisions route.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gwlab.errors import InvalidRequest
from gwlab.wire.limits import (
    MAX_CHOICE_OPTIONS,
    MAX_QUESTIONS,
    MAX_SCORE_LEVELS,
    MAX_STATE_DEPTH,
    MIN_CHOICE_OPTIONS,
    MIN_SCORE_LEVELS,
    NOUL_OUTCOMES,
    QUESTION_FIELDS,
    QUESTION_TYPES,
)

# MISSING and the field checks (blank_free ... show_value) are public: the OpenAI-shaped decisions route
# (gwlab/local/decisions_openai.py) checks its bodies with them
__all__ = [
    "MISSING",
    "Answer",
    "ChoiceAnswer",
    "DecisionRequest",
    "DecisionResult",
    "NoulAnswer",
    "Question",
    "ScoreAnswer",
    "UnknownAnswer",
    "blank_free",
    "build_request",
    "check_instructions",
    "check_stream",
    "checked_model",
    "choice_key",
    "kind_of",
    "listed",
    "parse_answer",
    "parse_request",
    "parse_response",
    "question_to_wire",
    "render_state",
    "response_body",
    "scalar",
    "show_value",
    "to_question",
]

MISSING: Any = object()  # a field the body does not have (None is a value a body can send)


# --- the request ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    """A validated System One question: `type` is noul|choice|score."""

    type: str
    instructions: str | None = None
    # noul: {"true": str|None, "false": str|None}; choice: {label: description|None}; score: [levels]
    criteria: Mapping[str, str | None] | Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """A System One request the gateway accepted; `state_text` is what the engine reads."""

    model: str
    state: str | Mapping[str, Any] | list[Any]
    state_text: str
    questions: dict[str, Question]
    # other top-level fields (assets, vendor routing): kept for the route to accept or refuse
    extra: dict[str, Any] = field(default_factory=dict)


def build_request(
    state: str | Mapping[str, Any] | Sequence[Any],
    questions: Mapping[str, Mapping[str, Any] | Question],
    model: str,
    **extra: Any,
) -> dict[str, Any]:
    """The System One body for `state` and `questions`, refused here (naming the field) if invalid.

    Optional fields set to None are omitted, as the spec asks; `extra` rides along at the top level.
    """
    check_stream(extra.get("stream"))
    body: dict[str, Any] = {"model": checked_model(model), "state": _client_state(state)}
    body["questions"] = {qid: question_to_wire(q) for qid, q in _questions(questions).items()}
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


_REQUEST_FIELDS = ("model", "state", "questions", "stream")


def parse_request(body: Any) -> DecisionRequest:
    """Validate an untrusted System One body; raises only `InvalidRequest`, naming the field."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("", f"the body must be a JSON object; got {kind_of(body)}")
    check_stream(body.get("stream"))
    model = checked_model(body.get("model", MISSING))
    state = body.get("state", MISSING)
    if state is MISSING:
        raise InvalidRequest("state", "required: the text or JSON object/array every question is about")
    state_text = render_state(state)
    questions = _questions(body.get("questions", MISSING))
    extra = {key: value for key, value in body.items() if key not in _REQUEST_FIELDS}
    return DecisionRequest(model, state, state_text, questions, extra)


def to_question(value: Any, qid: str = "question") -> Question:
    """One question (a dict or a `Question`-like object) validated; errors name `questions.<qid>`."""
    path = f"questions.{qid}"
    fields = _question_fields(value, path)
    for key in fields:
        if key not in QUESTION_FIELDS:
            takes = listed(QUESTION_FIELDS)
            raise InvalidRequest(f"{path}.{key}", f"unknown question field; a question takes only {takes}")
    qtype = fields.get("type", MISSING)
    if not isinstance(qtype, str) or qtype not in QUESTION_TYPES:
        got = "nothing" if qtype is MISSING else show_value(qtype)
        raise InvalidRequest(f"{path}.type", f"must be one of {listed(QUESTION_TYPES)}; got {got}")
    instructions = fields.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest(f"{path}.instructions", f"must be a string; got {kind_of(instructions)}")
    criteria = _CRITERIA[qtype](fields.get("criteria"), f"{path}.criteria")
    outcomes = criteria.values() if isinstance(criteria, Mapping) else ()
    if qtype == "noul" and not blank_free(instructions) and not any(map(blank_free, outcomes)):
        needs = "a noul question needs instructions or a described outcome"
        raise InvalidRequest(f"{path}.instructions", needs)
    return Question(qtype, instructions, criteria)


def check_instructions(questions: Mapping[str, Any]) -> None:
    """Refuse a question without instructions, naming it: System One servers (`/systemone`) require them.

    The spec and protocols.md §7.2 leave `instructions` optional (a noul question may be described by
    its outcomes alone), so `build_request` accepts that; only the System One route refuses it, and
    refusing here tells the user before the server does (a 422 after a paid round trip).
    """
    for qid, question in questions.items():
        instructions = question.get("instructions") if isinstance(question, Mapping) else None
        if not blank_free(instructions):
            raise InvalidRequest(f"questions.{qid}.instructions", "required by System One servers "
                                 "(/systemone): the question to answer, e.g. 'Is this about billing?'")


def question_to_wire(question: Question) -> dict[str, Any]:
    """The JSON form of a validated question, unset fields omitted."""
    wire: dict[str, Any] = {"type": question.type}
    if question.instructions is not None:
        wire["instructions"] = question.instructions
    if isinstance(question.criteria, Mapping):
        wire["criteria"] = dict(question.criteria)
    elif question.criteria is not None:
        wire["criteria"] = list(question.criteria)
    return wire


def render_state(state: Any) -> str:
    """The state as text for the engine: strings as given, JSON as `path: value` lines.

    Why lines and not JSON: the local engines embed or prompt with the text, and prose-like
    `customer.tier: gold` carries the same facts as `{"customer": {"tier": "gold"}}` without braces,
    quotes and escapes, which cost tokens in a 512-token window and add noise to an embedding. Dotted
    paths keep nesting unambiguous; arrays of scalars read as `tags: a, b`; key order is kept.
    """
    if isinstance(state, str):
        return state
    if not isinstance(state, Mapping | list | tuple):
        raise InvalidRequest("state", f"must be a string, a JSON object or a JSON array; got {kind_of(state)}")
    if isinstance(state, list | tuple) and all(map(_is_scalar, state)):
        return "\n".join(scalar(item) for item in state)  # a plain list reads as one item per line
    lines: list[str] = []
    _render(state, "", lines, 0)
    return "\n".join(lines)


def _render(value: Any, path: str, lines: list[str], depth: int) -> None:
    if depth >= MAX_STATE_DEPTH:
        raise InvalidRequest("state", f"nested deeper than {MAX_STATE_DEPTH} levels")
    if isinstance(value, Mapping):
        if not value and path:
            lines.append(f"{path}: {{}}")
        for key, item in value.items():
            _render(item, f"{path}.{key}" if path else str(key), lines, depth + 1)
    elif isinstance(value, list | tuple):
        if path and all(map(_is_scalar, value)):
            lines.append(f"{path}: " + (", ".join(scalar(item) for item in value) if value else "[]"))
        else:
            for index, item in enumerate(value):
                _render(item, f"{path}[{index}]", lines, depth + 1)
    else:
        lines.append(f"{path}: {scalar(value)}" if path else scalar(value))


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple)


def scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float):
        try:
            return json.dumps(value)
        except ValueError:  # an integer beyond Python's 4300-digit conversion limit
            raise InvalidRequest("state", "holds a number too large to read") from None
    return str(value)


def check_stream(stream: Any) -> None:
    if stream is not None and stream is not False:
        raise InvalidRequest("stream", "decisions never stream")


def checked_model(model: Any) -> str:
    if model is MISSING:
        raise InvalidRequest("model", "required: the ID of a decision model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("model", f"must be a non-empty string; got {show_value(model)}")
    return model


def _client_state(state: Any) -> Any:
    if isinstance(state, str):
        return state
    if not isinstance(state, Mapping | list | tuple):
        raise InvalidRequest("state", f"must be a string, a JSON object or a JSON array; got {kind_of(state)}")
    render_state(state)  # the same depth limit the gateway applies
    try:  # a JSON round trip: refuses what would not serialise, and leaves no aliasing with the caller
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidRequest("state", f"must be JSON-serialisable: {exc}") from None


def _questions(value: Any) -> dict[str, Question]:
    if value is MISSING:
        raise InvalidRequest("questions", "required: an object mapping question ids to questions")
    if not isinstance(value, Mapping):
        raise InvalidRequest("questions",
                             f"must be an object mapping question ids to questions; got {kind_of(value)}")
    if not value:
        raise InvalidRequest("questions", "needs at least one question")
    if len(value) > MAX_QUESTIONS:
        raise InvalidRequest("questions", f"takes at most {MAX_QUESTIONS} questions; got {len(value)}")
    questions: dict[str, Question] = {}
    for qid, question in value.items():
        if not isinstance(qid, str) or not qid:
            raise InvalidRequest("questions", f"question ids must be non-empty strings; got {show_value(qid)}")
        questions[qid] = to_question(question, qid)
    return questions


def _question_fields(value: Any, path: str) -> dict[Any, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(getattr(value, "type", None), str):  # a Question, or anything shaped like one
        names = ("type", "instructions", "criteria")
        return {name: getattr(value, name) for name in names if getattr(value, name, None) is not None}
    raise InvalidRequest(path, f"must be an object with a type; got {kind_of(value)}")


def _noul_criteria(value: Any, path: str) -> dict[str, str | None] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(path, f"a noul question takes an object with keys 'true' and/or 'false'; "
                                   f"got {kind_of(value)}")
    for key, text in value.items():
        if key not in NOUL_OUTCOMES:
            raise InvalidRequest(f"{path}.{key}",
                                 "a noul question's criteria take only the keys 'true' and 'false'")
        if text is not None and not isinstance(text, str):
            raise InvalidRequest(f"{path}.{key}", f"must be a string or null; got {kind_of(text)}")
    return dict(value)


def _choice_criteria(value: Any, path: str) -> dict[str, str | None]:
    if value is None:
        raise InvalidRequest(path, "a choice question needs criteria: "
                                   "an object mapping each option to a description or null")
    if not isinstance(value, Mapping):
        raise InvalidRequest(path, f"a choice question takes an object of options; got {kind_of(value)}")
    n = len(value)
    if n < MIN_CHOICE_OPTIONS:
        raise InvalidRequest(path, f"a choice question needs at least {MIN_CHOICE_OPTIONS} options; got {n}")
    if n > MAX_CHOICE_OPTIONS:
        raise InvalidRequest(path, f"a choice question takes at most {MAX_CHOICE_OPTIONS} options; got {n}")
    for label, text in value.items():
        if not blank_free(label):
            raise InvalidRequest(path, f"option labels must be non-empty strings; got {show_value(label)}")
        if text is not None and not isinstance(text, str):
            raise InvalidRequest(f"{path}.{label}", f"must be a string or null; got {kind_of(text)}")
    return dict(value)


def _score_criteria(value: Any, path: str) -> list[str]:
    if value is None:
        raise InvalidRequest(path, "a score question needs criteria: an ordered array of level descriptions")
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidRequest(path, f"a score question takes an ordered array of level descriptions; "
                                   f"got {kind_of(value)}")
    count = len(value)
    if count < MIN_SCORE_LEVELS:
        raise InvalidRequest(path, f"a score question needs at least {MIN_SCORE_LEVELS} levels; got {count}")
    if count > MAX_SCORE_LEVELS:
        raise InvalidRequest(path, f"a score question takes at most {MAX_SCORE_LEVELS} levels; got {count}")
    for index, level in enumerate(value):
        if not blank_free(level):
            raise InvalidRequest(f"{path}.{index}", f"a level must be a non-empty string; got {show_value(level)}")
    return list(value)


_CRITERIA = {"noul": _noul_criteria, "choice": _choice_criteria, "score": _score_criteria}


def blank_free(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def kind_of(value: Any) -> str:
    """The JSON name of a value's type, for messages that must not echo the value itself."""
    if value is None:
        return "null"
    for types, name in ((bool, "boolean"), (int | float, "number"), (str, "string"),
                        (Mapping, "object"), (list | tuple, "array")):
        if isinstance(value, types):
            return name
    return type(value).__name__


def show_value(value: Any) -> str:
    """A short rendering of a refused value: short strings quoted, anything else by its kind."""
    if isinstance(value, str) and len(value) <= 40:
        return repr(value)
    if isinstance(value, bool | int | float) or value is None:
        return scalar(value) if not isinstance(value, int) or abs(value) < 10**40 else "a number"
    return kind_of(value)


def listed(names: Sequence[str]) -> str:
    return ", ".join(names)


# --- shared by both directions of the OpenAI decisions shape (protocols.md §7.8) ---------------------


def choice_key(value: Any) -> str:
    """A choice value as a System One criteria key: booleans as "true"/"false" (the client's translator,
    wire/decisions_openai.py, and the local gateway's, gwlab/local/decisions_openai.py, both use it)."""
    return ("true" if value else "false") if isinstance(value, bool) else value


# --- the gateway's answer body (protocols.md §7.3) -------------------------------------------------

_ANSWER_FIELDS = {"noul": ("noul",), "choice": ("choice", "confidence", "probabilities"),
                  "score": ("score", "confidence", "legend", "probabilities")}


def response_body(
    request: DecisionRequest, answers: Any, input_tokens: int | None = None, model: str | None = None
) -> dict[str, Any]:
    """Exactly the System One response: `model`, typed `answers` keyed like the request, `usage`.

    `answers` is a question id → answer dict mapping, or a `Decision` (answers + input_tokens) as the
    local engines return it. Only the spec's fields of each type are written, `type` first; a score's
    `legend` is filled from its criteria when the engine left it out. `model` defaults to the request's.
    """
    if input_tokens is None:
        input_tokens = getattr(answers, "input_tokens", None)
        if input_tokens is None:
            raise TypeError("response_body needs input_tokens (or a Decision that carries them)")
    answers = getattr(answers, "answers", answers)
    body: dict[str, Any] = {}
    for qid, question in request.questions.items():
        if qid not in answers:
            raise KeyError(f"the engine returned no answer for question {qid!r}")
        given = answers[qid]
        answer: dict[str, Any] = {"type": question.type}
        for name in _ANSWER_FIELDS[question.type]:
            if name in given:
                answer[name] = given[name]
            elif name == "legend" and question.criteria is not None:
                answer[name] = {str(level): text for level, text in enumerate(question.criteria)}
        body[qid] = answer
    return {"model": model or request.model, "answers": body,
            "usage": {"input_tokens": int(input_tokens), "output_tokens": 0}}


# --- typed results (client side, tolerant) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoulAnswer:
    """P(the condition holds), 0 to 1."""

    type: ClassVar[str] = "noul"
    noul: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def value(self) -> float | None:
        return self.noul


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    """The selected option, a probability per option, and how peaked that distribution is."""

    type: ClassVar[str] = "choice"
    choice: str | None = None
    probabilities: Mapping[str, float] = field(default_factory=dict)
    confidence: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def value(self) -> str | None:
        return self.choice


@dataclass(frozen=True, slots=True)
class ScoreAnswer:
    """The expected level (from 0, may be fractional), a probability per level, and the legend."""

    type: ClassVar[str] = "score"
    score: float | None = None
    probabilities: Mapping[str, float] = field(default_factory=dict)
    confidence: float | None = None
    legend: Mapping[str, str] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def value(self) -> float | None:
        return self.score

    @property
    def level(self) -> int | None:
        """The most likely level (what accuracy is computed from), not the expected one (`score`):
        rounding `score` gives another level, and another accuracy. The lowest on a tie."""
        levels = {int(k): p for k, p in self.probabilities.items() if k.isdigit()}
        return max(sorted(levels), key=levels.__getitem__) if levels else None


@dataclass(frozen=True, slots=True)
class UnknownAnswer:
    """An answer of a type this client does not know (`box`, a newer one): kept whole, not dropped."""

    type: str | None = None
    raw: Any = field(default=None, repr=False)

    @property
    def value(self) -> Any:
        return None


Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer | UnknownAnswer


def parse_answer(data: Any) -> Answer:
    """One answer, typed by its `type` (or, when a gateway omits it, by the field it carries)."""
    if not isinstance(data, Mapping):
        return UnknownAnswer(None, data)
    kind = data.get("type")
    if kind is None:
        kind = next((name for name in QUESTION_TYPES if name in data), None)
    raw = dict(data)
    if kind == "noul":
        return NoulAnswer(_number(data.get("noul")), raw)
    if kind == "choice":
        choice = data.get("choice")
        return ChoiceAnswer(choice if isinstance(choice, str) else None,
                            _probabilities(data.get("probabilities")), _number(data.get("confidence")), raw)
    if kind == "score":
        given = got if isinstance(got := data.get("legend"), Mapping) else {}
        legend = {str(key): text for key, text in given.items() if isinstance(text, str)}
        return ScoreAnswer(_number(data.get("score")), _probabilities(data.get("probabilities")),
                           _number(data.get("confidence")), legend, raw)
    return UnknownAnswer(kind if isinstance(kind, str) else None, raw)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _probabilities(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {str(key): float(p) for key, p in value.items() if _number(p) is not None}


@dataclass(frozen=True, slots=True, repr=False)
class DecisionResult:
    """Typed answers keyed like the request; `raw` keeps the whole body as the gateway sent it."""

    answers: dict[str, Answer]
    usage: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    request_id: str | None = None
    raw: Any = None

    def __getitem__(self, qid: str) -> Answer:
        return self.answers[qid]

    @property
    def input_tokens(self) -> int | None:
        tokens = self.usage.get("input_tokens")
        return tokens if isinstance(tokens, int) else None

    def to_record(self) -> dict[str, Any]:
        """One flat row of the pandas layer's tidy columns (`{q}__noul`; `{q}__choice`|`{q}__score` and
        `{q}__level`, `{q}__p__{option}`, `{q}__confidence`). Unknown answer types add no column (their
        `raw` stays on the result). The names are the frames layer's (gwlab/frames/columns.py), asked
        here when called, so wire spells none of them."""
        from gwlab.frames.columns import decision_record  # pure: no pandas, nothing of wire

        return decision_record(self.answers)

    def __repr__(self) -> str:
        shown = [f"{qid}: {_brief(answer)}" for qid, answer in list(self.answers.items())[:5]]
        more = ", …" if len(self.answers) > 5 else ""
        return (f"DecisionResult(model={self.model!r}, answers={{{', '.join(shown)}{more}}}, "
                f"input_tokens={self.input_tokens})")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(qid)}</td><td>{html.escape(str(answer.type))}</td>"
            f"<td>{html.escape(_value_text(answer.value))}</td>"
            f"<td>{html.escape(_value_text(_chosen_probability(answer)))}</td>"
            f"<td>{html.escape(_value_text(getattr(answer, 'confidence', None)))}</td></tr>"
            for qid, answer in self.answers.items())
        caption = html.escape(f"model {self.model or '?'} · input tokens {self.input_tokens}"
                              + (f" · request {self.request_id}" if self.request_id else ""))
        return (f"<table><caption>{caption}</caption><thead><tr><th>question</th><th>type</th>"
                f"<th>answer</th><th>P(answer)</th><th>confidence</th></tr></thead><tbody>{rows}</tbody>"
                "</table>")


def _value_text(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _chosen_probability(answer: Answer) -> float | None:
    """P(the chosen option) of a choice answer: the number a reader takes a bare figure beside it for."""
    if isinstance(answer, ChoiceAnswer) and answer.choice is not None:
        return answer.probabilities.get(answer.choice)
    return None


def _brief(answer: Answer) -> str:
    """`choice 'quality' (P=0.47, confidence 0.17)`: the confidence (how peaked the distribution is)
    is labelled, so it is not read as the probability of the answer shown."""
    value = repr(answer.value) if isinstance(answer.value, str) else _value_text(answer.value)
    probability, confidence = _chosen_probability(answer), getattr(answer, "confidence", None)
    shown = ([f"P={probability:.2f}"] if probability is not None else []) + (
        [f"confidence {confidence:.2f}"] if confidence is not None else [])
    return f"{answer.type} {value}" + (f" ({', '.join(shown)})" if shown else "")


def parse_response(data: Any, request_id: str | None = None) -> DecisionResult:
    """Typed result of a decisions body; never raises on unexpected shapes, keeps everything in `raw`."""
    body = data if isinstance(data, Mapping) else {}
    given = body.get("answers")
    answers: dict[str, Answer] = {}
    if isinstance(given, Mapping):
        answers = {str(qid): parse_answer(answer) for qid, answer in given.items()}
    elif isinstance(given, list):  # a gateway answering in a list: keyed by name, else position
        for index, answer in enumerate(given):
            name = answer.get("name") if isinstance(answer, Mapping) else None
            answers[name if isinstance(name, str) else str(index)] = parse_answer(answer)
    usage = dict(body["usage"]) if isinstance(body.get("usage"), Mapping) else {}
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return DecisionResult(answers, usage, model, request_id, data)
