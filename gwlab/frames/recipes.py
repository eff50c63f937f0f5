"""Per protocol family: the body a row becomes, the tidy columns its answer fills, the usage it reports.

A table, not branches: the runner only knows `RowRecipe`, and each recipe carries its family's row of
`gwlab.wire.families` (path, billing, name), so nothing here repeats a protocol fact. Bodies are built
by the wire modules' own `build_request` (strict writer: a row that breaks a limit fails locally, naming the field) and
answers read by their `parse_response` (tolerant reader).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.wire import chat, decisions, messages, responses
from gwlab.wire.families import FAMILIES, ProtocolFamily, usage_of
from gwlab.wire.models import default_model

__all__ = ["META_COLUMNS", "TEXT_RECIPES", "RowRecipe", "chat_recipe", "decisions_recipe", "decisions_recipe_for",
           "free_params", "messages_recipe", "rebuild", "responses_recipe", "text_recipe"]

# per row, whatever the family; `__status` says which of sent/cached/duplicate/error/not_run it is
META_COLUMNS: dict[str, str] = {"__input_tokens": "Int64", "__output_tokens": "Int64", "__request_id": "str",
                                "__error": "str", "__status": "str"}


@dataclass(frozen=True, slots=True)
class RowRecipe:
    """How one kind of row request is sent and read."""

    family: ProtocolFamily
    model: str
    columns: dict[str, str]  # answer column -> dtype, in order
    body: Callable[[Any], dict[str, Any]]  # the row's value (text, JSON state, (prompt, system)) -> body
    record: Callable[[Any], dict[str, Any]]  # response JSON -> {column: value}
    usage: Callable[[Any], tuple[int | None, int | None]]  # response JSON -> (input, output) tokens
    reserved_output: int = 0  # output tokens a budget must hold back per request (the max tokens asked)
    spread: tuple[str, ...] = ()  # numeric columns whose spread `repeats=k` reports
    # (row value, the row's send: body -> Answer) -> the row's Answer, when a row may take more than one
    # request: df.gw.extract's re-asks and its resend in the prompt (frames/extract.py, wire/structured/driver.py)
    exchange: Callable[[Any, Callable[[dict[str, Any]], Awaitable[Any]]], Awaitable[Any]] | None = None
    # the factory's arguments besides the model (questions, max_tokens, params): what a run record keeps
    # as the request parameters, and what `rebuild` makes the same recipe from
    spec: Mapping[str, Any] | None = None
    decided: tuple[str, ...] = ()  # answer columns whose agreement across repeats `repeats=k` reports

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def endpoint(self) -> str:
        """The family's path: what checkpointed answers and prices are keyed by."""
        return self.family.path

    @property
    def charges_output(self) -> bool:
        return self.family.charges_output


def decisions_recipe(questions: Mapping[str, Any], model: str, **extra: Any) -> RowRecipe:
    """One decision request per row value (the state); every question packed into it."""
    checked = decisions.build_request("x", questions, model, **extra)  # validates once, names the field
    wire_questions = checked["questions"]
    columns: dict[str, str] = {}
    spread: list[str] = []
    for qid, q in wire_questions.items():
        if q["type"] == tidy.NOUL:
            columns[tidy.column(qid, tidy.NOUL)] = "float64"
            spread.append(tidy.column(qid, tidy.NOUL))
        else:
            columns[tidy.column(qid, q["type"])] = "str" if q["type"] == tidy.CHOICE else "float64"
            if q["type"] == tidy.SCORE:  # the expected level above; the most likely one here
                columns[tidy.column(qid, tidy.LEVEL)] = "Int64"
            criteria = q["criteria"]
            options = list(criteria) if q["type"] == tidy.CHOICE else [str(i) for i in range(len(criteria))]
            probabilities = [tidy.probability(qid, option) for option in options]
            columns.update(dict.fromkeys(probabilities, "float64"))
            columns[tidy.column(qid, tidy.CONFIDENCE)] = "float64"
            spread += ([tidy.column(qid, tidy.SCORE)] if q["type"] == tidy.SCORE else []) + probabilities
    top = {k: v for k, v in checked.items() if k not in ("state", "questions")}

    def body(state: Any) -> dict[str, Any]:
        if isinstance(state, str):  # the hot path: the questions were validated above
            return {**top, "state": state, "questions": wire_questions}
        return decisions.build_request(state, wire_questions, model, **extra)

    def record(data: Any) -> dict[str, Any]:
        return decisions.parse_response(data).to_record()

    decided = tuple(c for c in columns if tidy.question_of(c, *tidy.DECIDED) is not None)
    return RowRecipe(FAMILIES["decisions"], model, columns, body, record, usage_of, spread=tuple(spread),
                     spec={"questions": wire_questions, **extra}, decided=decided)


# `finish` is the protocol's own reason; `ending` gwlab's word for it, the same in every family and in the
# ledger (gwlab/wire/endings.py): complete, capped (the max_tokens cap), filtered, refused, other, interrupted
_PROMPT_COLUMNS = {"text": "str", "finish": "str", "ending": "str", "tool_calls": "object"}


def _calls(calls: list[Any]) -> list[dict[str, Any]]:
    """Tool calls as plain dicts `{name, arguments}`; arguments parsed when they are valid JSON."""
    out = []
    for call in calls:
        arguments = getattr(call, "arguments", None)
        if arguments is None:
            arguments = getattr(call, "input", None)
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # invalid JSON is kept as the model wrote it
                arguments = json.loads(arguments or "{}")
        out.append({"name": call.name, "arguments": arguments})
    return out


def _split(value: Any) -> tuple[Any, str | None]:
    return value if isinstance(value, tuple) else (value, None)


# per family: request fields that a named argument of df.gw.<method> sets -> that argument
_NAMED: dict[str, dict[str, str]] = {
    "chat": {"model": "model", "messages": "prompt", "system": "system", "max_tokens": "max_tokens",
             "max_completion_tokens": "max_tokens", "stream": "(no option: rows are never streamed)"},
    "responses": {"model": "model", "input": "prompt", "instructions": "instructions", "max_tokens": "max_tokens",
                  "max_output_tokens": "max_tokens", "stream": "(no option: rows are never streamed)"},
    "messages": {"model": "model", "messages": "prompt", "system": "system", "max_tokens": "max_tokens",
                 "stream": "(no option: rows are never streamed)"},
}


def free_params(family: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """`params=` checked: a field a named argument sets is refused, naming it, rather than overriding or
    being overridden silently (or Python's `got multiple values` TypeError): one place per setting."""
    params = dict(params or {})
    for key in params:
        argument = _NAMED[family].get(key)
        if argument is not None:
            how = argument if argument.startswith("(") else f"pass {argument}= instead, not params={{{key!r}: ...}}"
            raise InvalidRequest(f"params.{key}", f"set by a named argument of df.gw: {how}")
    return params


def chat_recipe(model: str, *, max_tokens: int | None = None, **params: Any) -> RowRecipe:
    """A chat completion per row; the row value is the prompt or (prompt, system)."""

    def body(value: Any) -> dict[str, Any]:
        prompt, system = _split(value)
        msgs = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        return chat.build_request(msgs, model=model, max_completion_tokens=max_tokens, **params)

    def record(data: Any) -> dict[str, Any]:
        result = chat.parse_response(data)
        return {"text": result.text, "finish": result.finish_reason, "ending": result.ending,
                "tool_calls": _calls(result.tool_calls)}

    body("check")  # validates the parameters once, before any row
    return RowRecipe(FAMILIES["chat"], model, dict(_PROMPT_COLUMNS), body, record, usage_of,
                     reserved_output=max_tokens or 0, spec={"max_tokens": max_tokens, **params}, decided=("text",))


def responses_recipe(model: str, *, max_tokens: int | None = None, **params: Any) -> RowRecipe:
    """A responses-protocol call per row; the system text travels as `instructions`."""

    def body(value: Any) -> dict[str, Any]:
        prompt, system = _split(value)
        return responses.build_request(prompt, model=model, instructions=system, max_output_tokens=max_tokens,
                                       **params)

    def record(data: Any) -> dict[str, Any]:
        result = responses.parse_response(data)
        return {"text": result.text, "status": result.status, "ending": result.ending,
                "tool_calls": _calls(result.tool_calls)}

    body("check")
    columns = {"text": "str", "status": "str", "ending": "str", "tool_calls": "object"}
    return RowRecipe(FAMILIES["responses"], model, columns, body, record, usage_of,
                     reserved_output=max_tokens or 0, spec={"max_tokens": max_tokens, **params}, decided=("text",))


def messages_recipe(model: str, *, max_tokens: int | None = None, **params: Any) -> RowRecipe:
    """A messages-protocol call per row; `max_tokens` is required by that protocol."""
    if max_tokens is None:
        raise InvalidRequest("max_tokens", "required by the messages protocol: a positive integer")

    def body(value: Any) -> dict[str, Any]:
        prompt, system = _split(value)
        return messages.build_request(prompt, model=model, max_tokens=max_tokens, system=system, **params)

    def record(data: Any) -> dict[str, Any]:
        result = messages.parse_response(data)
        return {"text": result.text, "finish": result.stop_reason, "ending": result.ending,
                "tool_calls": _calls(result.tool_calls)}

    body("check")
    return RowRecipe(FAMILIES["messages"], model, dict(_PROMPT_COLUMNS), body, record, usage_of,
                     reserved_output=max_tokens, spec={"max_tokens": max_tokens, **params}, decided=("text",))


# the text families' recipes, by family name (gwlab.wire.families.TEXT)
TEXT_RECIPES: dict[str, Callable[..., RowRecipe]] = {"chat": chat_recipe, "responses": responses_recipe,
                                                     "messages": messages_recipe}


def text_recipe(family: str, model: str | None, max_tokens: int | None,
                params: Mapping[str, Any] | None) -> RowRecipe:
    """A text family's recipe: the family's default model when none is named, `params=` checked."""
    return TEXT_RECIPES[family](model or FAMILIES[family].default_model, max_tokens=max_tokens,
                                **free_params(family, params))


def rebuild(family: str, model: str, spec: Mapping[str, Any]) -> RowRecipe:
    """The recipe a run record describes (its family, model and `RowRecipe.spec`), to read its answers."""
    if family == "decisions":
        rest = {k: v for k, v in spec.items() if k != "questions"}
        return decisions_recipe(spec["questions"], model, **rest)
    if family not in TEXT_RECIPES:
        raise InvalidRequest("family", f"no row recipe for family {family!r}")
    return TEXT_RECIPES[family](model, **spec)


def decisions_recipe_for(questions: Mapping[str, Any], model: str | None, **extra: Any) -> RowRecipe:
    """The decisions recipe with the family's default model when none is named."""
    return decisions_recipe(questions, model or default_model(None, FAMILIES["decisions"].ability), **extra)
