"""`df.gw.extract`: a text family's recipe whose answer is JSON of a schema, read into typed columns.

Family-independent: the request form is the family row's `structured_output` (gwlab/wire/schema.py
turns it into fields), so nothing here names a family. A row's answer is validated; an invalid one is
re-asked (`follow_up`) at most `max_reasks` times with the validation error shown to the model, each a
real request whose usage is added to the row's. A row still invalid keeps its raw text in `__raw` and
the error in `__error`: no value is invented.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from gwlab.errors import InvalidRequest, StructuredFallbackWarning
from gwlab.frames.recipes import TEXT_RECIPES, RowRecipe, free_params
from gwlab.wire.families import FAMILIES, TEXT
from gwlab.wire.schema import DEFAULT_MAX_REASKS, AnswerInvalid, Schema, refuses_form

__all__ = [
    "DEFAULT_MAX_REASKS",
    "DTYPES",
    "PROMPT_ONLY",
    "STRUCTURED",
    "AskMode",
    "StructuredFallbackWarning",
    "dtypes",
    "extract_columns",
    "extract_recipe",
    "field_record",
    "reading_fields",
    "typed_columns",
]

STRUCTURED = ("auto", "native", "prompt")
Structured = Literal["auto", "native", "prompt"]
# gateways (normalized base URL) found without structured output, and the evidence: for the process's life
PROMPT_ONLY: dict[str, str] = {}
# per row, beside the fields: the answer as the model wrote it, and how many times it was re-asked
EXTRACT_COLUMNS = {"__raw": "str", "__reasks": "Int64"}


def extract_recipe(protocol: str, schema: Schema, model: str | None, max_tokens: int | None,
                   params: Mapping[str, Any] | None, *, max_reasks: int = DEFAULT_MAX_REASKS,
                   structured: Structured = "auto", gateway: str | None = None) -> tuple[RowRecipe, AskMode]:
    """The recipe of `df.gw.extract` over `protocol`: its answer columns are the schema's fields.

    "auto" asks natively unless `gateway` is known to lack structured output; a 400 naming the form's
    field switches the run (and the gateway, in PROMPT_ONLY) to the prompt, the refused row resent."""
    if protocol not in TEXT:
        raise InvalidRequest("protocol", f"one of {', '.join(TEXT)}; got {protocol!r}")
    if structured not in STRUCTURED:
        raise InvalidRequest("structured", f"one of {', '.join(STRUCTURED)}; got {structured!r}")
    if not isinstance(max_reasks, int) or isinstance(max_reasks, bool) or max_reasks < 0:
        raise InvalidRequest("max_reasks", f"a non-negative integer; got {max_reasks!r}")
    reserved = [f for f in schema.fields if f.startswith("__")]
    if reserved:
        raise InvalidRequest(f"schema.{reserved[0]}", "a field name may not start with '__' (run columns do)")
    form = FAMILIES[protocol].structured_output
    asks = schema.request_fields(form)
    extra = free_params(protocol, params)
    for key in asks:
        if key in extra:
            raise InvalidRequest(f"params.{key}", "set by schema=: pass structured='prompt' to ask in the prompt")
    chosen = model or FAMILIES[protocol].default_model
    native = TEXT_RECIPES[protocol](chosen, max_tokens=max_tokens, **extra, **asks)
    plain = TEXT_RECIPES[protocol](chosen, max_tokens=max_tokens, **extra)
    mode = AskMode(structured == "prompt" or (structured == "auto" and gateway in PROMPT_ONLY))
    base = native  # the reader: a tool-form answer or text alike (answer_text falls back to the text)

    def turns(value: Any) -> tuple[list[dict[str, Any]], str | None]:
        prompt, system = value if isinstance(value, tuple) else (value, None)
        ask = schema.instructions() if mode.in_prompt else schema.absent_rule()
        text = f"{prompt}\n\n{ask}" if ask else prompt
        return [{"role": "user", "content": text}], system

    def body(value: Any) -> dict[str, Any]:
        messages, system = turns(value)
        return (plain if mode.in_prompt else native).body((messages, system) if system is not None else messages)

    def fallback(error: BaseException, origin: str | None) -> bool:
        if structured != "auto" or not refuses_form(form, error):
            return False
        if not mode.in_prompt:
            mode.in_prompt = True
            if origin is not None and origin not in PROMPT_ONLY:
                PROMPT_ONLY[origin] = f"{form} refused: {error}"
                warnings.warn(f"{origin} has no structured output ({form} refused with a 400): gwlab asks in "
                              "the prompt and parses, for this gateway from now on (structured='native' to "
                              "force the native form)", StructuredFallbackWarning, stacklevel=2)
        return True

    record = field_record(base, schema)

    def follow_up(value: Any, data: Any, asked: int) -> dict[str, Any] | None:
        if asked >= max_reasks:
            return None
        try:
            record(data)
            return None
        except AnswerInvalid as exc:
            messages, system = turns(value)
            messages += Schema.reask_turns(exc)
            return (plain if mode.in_prompt else native).body((messages, system) if system is not None else messages)

    recipe = RowRecipe(base.family, base.model, extract_columns(schema), body, record, base.usage,
                       reserved_output=base.reserved_output, follow_up=follow_up, fallback=fallback, spec=base.spec)
    return recipe, mode


def extract_columns(schema: Schema) -> dict[str, str]:
    """An extract run's answer columns: the schema's fields, then `__raw` and `__reasks`."""
    return {**dict.fromkeys(schema.fields, "object"), **EXTRACT_COLUMNS}


def field_record(base: RowRecipe, schema: Schema) -> Callable[[Any], dict[str, Any]]:
    """A row's fields (and `__raw`, `__reasks`) from its answer JSON, read in the family's form; an invalid
    answer raises AnswerInvalid whose `.record` keeps the raw text (paid for, so kept, but no value)."""
    form = base.family.structured_output

    def record(data: Any) -> dict[str, Any]:
        answer = base.record(data)
        raw = schema.answer_text(form, answer.get("text"), answer.get("tool_calls") or [])
        meta = {"__raw": raw, "__reasks": data.get("gwlab_reasks", 0) if isinstance(data, Mapping) else 0}
        try:
            value = schema.parse(raw)
        except AnswerInvalid as exc:
            exc.record = meta
            raise
        plain = value.model_dump(mode="json") if schema.model is not None else value
        problem = _beyond_a_column(schema, plain)
        if problem:
            exc = AnswerInvalid(problem, raw)
            exc.record = meta
            raise exc
        return {**{field: plain.get(field) for field in schema.fields}, **meta}

    return record


_FIRST_DAY = dt.datetime(1677, 9, 22)  # the first midnight and the last instant datetime64[ns] holds
_LAST_INSTANT = dt.datetime(2262, 4, 11, 23, 47, 16)


def _beyond_a_column(schema: Schema, plain: Mapping[str, Any]) -> str | None:
    """Why a valid answer's date cannot be its column's value (datetime64[ns] holds 1677-09-22 to
    2262-04-11: a local model's "4321-04-04" stopped the whole run), or None. Such an answer is invalid, so
    it is re-asked and else an error row keeping its raw text, as any invalid answer is."""
    for field, kind in schema.kinds().items():
        value = plain.get(field)
        if kind != "date" or not isinstance(value, str):
            continue
        when = dt.datetime.fromisoformat(value)  # a date or a datetime, as the schema validated it
        when = when.astimezone(dt.UTC).replace(tzinfo=None) if when.tzinfo is not None else when
        if not _FIRST_DAY <= when <= _LAST_INSTANT:
            return f"{field}: {value!r} is not a date between 1677-09-22 and 2262-04-11"
    return None


def reading_fields(base: RowRecipe, schema: Schema) -> RowRecipe:
    """`base` (a rebuilt text recipe) reading `schema`'s fields: how a recorded extract run is read back."""
    return dataclasses.replace(base, columns=extract_columns(schema), record=field_record(base, schema))


@dataclass
class AskMode:
    """How a run asks for structured output: natively until a gateway refuses it, then in the prompt."""

    in_prompt: bool

    def note(self, gateway: str | None) -> str | None:
        """What `.run` says when the schema went in the prompt; None when asked natively."""
        if not self.in_prompt:
            return None
        evidence = PROMPT_ONLY.get(gateway or "")
        return f"asked in the prompt ({evidence})" if evidence else "asked in the prompt (structured='prompt')"


# a field's kind (`Schema.kinds`, wire's words) -> its nullable pandas dtype; any other kind is one object column
DTYPES = {"integer": "Int64", "number": "Float64", "boolean": "boolean", "string": "string",
          "date": "datetime64[ns]", "enum": "category"}


def dtypes(schema: Schema) -> dict[str, str]:
    """Per top-level field, its pandas dtype: Int64, Float64, boolean, string, category, datetime64[ns]
    (dates and datetimes), object (lists and nested objects)."""
    return {field: DTYPES.get(kind, "object") for field, kind in schema.kinds().items()}


def typed_columns(answers: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The schema's columns of a run's answers in their pandas dtypes (`dtypes`). Values were
    validated against the schema, so no conversion here can lose information."""
    for field, dtype in dtypes(schema).items():
        values = [None if _missing(v) else v for v in answers[field]]
        if dtype == "category":
            answers[field] = pd.Categorical(values, categories=schema.categories(field))
        elif dtype == "datetime64[ns]":
            fmt = schema.json["properties"][field].get("format")
            answers[field] = _datetimes(pd.Series(values, index=answers.index, dtype=object), fmt)
        elif dtype != "object":
            answers[field] = pd.array(values, dtype=dtype)
    return answers


def _datetimes(values: pd.Series, fmt: str | None) -> pd.Series:
    """Dates as datetime64[ns] at midnight (a date has no zone: never UTC); datetimes as datetime64[ns],
    or datetime64[ns, UTC] when an answer carries an offset (none is dropped; naive ones then read as UTC).
    Read as the schema validated them (Python's `fromisoformat`), so every valid answer converts, an ISO
    week date such as 2026-W03-4 included, and the unit is ns whatever pandas infers."""
    parse = dt.date.fromisoformat if fmt == "date" else dt.datetime.fromisoformat
    parsed = [parse(v) if isinstance(v, str) else v for v in values]
    if fmt == "date":  # a date field: its calendar day, whatever form the value came in
        parsed = [None if v is None else dt.datetime.combine(pd.Timestamp(v).date(), dt.time()) for v in parsed]
    aware = any(getattr(v, "tzinfo", None) is not None for v in parsed)
    out = pd.to_datetime(pd.Series(parsed, index=values.index, dtype=object), utc=aware)
    return out.astype("datetime64[ns, UTC]" if aware else "datetime64[ns]")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)
