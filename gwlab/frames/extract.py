"""`df.gw.extract`: a text family's recipe whose answer is JSON of a schema, read into typed columns.

Family-independent: the request form is the family row's `structured_output` (a `StructuredForm`), so
nothing here names a family. A row's requests are driven by the one re-ask driver single calls use too
(`wire/structured/driver.py`): its answer is validated and an invalid one re-asked at most `max_reasks`
times with the validation error shown to the model, each a real request whose usage is added to the
row's. A row still invalid keeps its raw text in `__raw` and the error in `__error`: no value is invented.
A gateway that refuses the native form is asked in the prompt; the fact is the gateway's dialect
(`structured_output`, client/dialect.py), learned once and shared with single calls.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from gwlab.errors import InvalidRequest, StructuredFallbackWarning
from gwlab.frames.recipes import TEXT_RECIPES, RowRecipe, free_params
from gwlab.wire.families import FAMILIES, TEXT
from gwlab.wire.schema import DEFAULT_MAX_REASKS, AnswerInvalid, Schema
from gwlab.wire.structured.driver import Asking, converse, first_turns
from gwlab.wire.structured.forms import IN_PROMPT, StructuredForm

__all__ = [
    "DEFAULT_MAX_REASKS",
    "DTYPES",
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
# per row, beside the fields: the answer as the model wrote it, and how many times it was re-asked
EXTRACT_COLUMNS = {"__raw": "str", "__reasks": "Int64"}


def extract_recipe(protocol: str, schema: Schema, model: str | None, max_tokens: int | None,
                   params: Mapping[str, Any] | None, *, max_reasks: int = DEFAULT_MAX_REASKS,
                   structured: Structured = "auto", dialects: Any = None) -> tuple[RowRecipe, AskMode]:
    """The recipe of `df.gw.extract` over `protocol`: its answer columns are the schema's fields.

    "auto" asks natively unless the gateway (`dialects`: its Connection's `DialectBook`, client/dialect.py)
    is known to refuse the form; a 400 naming the form's field switches the run (and the gateway, there) to
    the prompt, the refused row resent. Without `dialects` (a recipe that only builds a meta) nothing is learnt."""
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
    assert form is not None, "every TEXT family has a native structured form"
    asks = schema.request_fields(form)
    extra = free_params(protocol, params)
    for key in asks:
        if key in extra:
            raise InvalidRequest(f"params.{key}", "set by schema=: pass structured='prompt' to ask in the prompt")
    chosen = model or FAMILIES[protocol].default_model
    native = TEXT_RECIPES[protocol](chosen, max_tokens=max_tokens, **extra, **asks)
    plain = TEXT_RECIPES[protocol](chosen, max_tokens=max_tokens, **extra)
    mode = AskMode(structured, form, dialects)

    def request(turns: list[Any], fields: Mapping[str, Any], system: str | None) -> dict[str, Any]:
        return (native if fields else plain).body((turns, system) if system is not None else turns)

    def body(value: Any) -> dict[str, Any]:  # the row's first request, as the driver sends it
        prompt, system = value if isinstance(value, tuple) else (value, None)
        asked = mode.form()
        return request(first_turns(asked, schema, prompt), asked.request_fields(schema), system)

    def read(answer: Any) -> tuple[str | None, list[Any]]:
        reply = native.record(answer.data)  # a tool-form answer or text alike
        return reply.get("text"), reply.get("tool_calls") or []

    async def exchange(value: Any, send: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
        prompt, system = value if isinstance(value, tuple) else (value, None)
        asking = Asking(schema, mode.form(), max_reasks, on_refused=mode.refused if structured == "auto" else None,
                        check=column_check(schema))
        try:
            done = await converse(asking, prompt, lambda turns, fields: send(request(turns, fields, system)), read)
            replies, asked = done.replies, done.asked
        except AnswerInvalid as exc:  # paid for and kept: the reader makes it an error row with its text
            if not exc.replies:
                raise
            replies, asked = exc.replies, exc.asked
        return _summed(replies, asked)

    recipe = RowRecipe(native.family, native.model, extract_columns(schema), body, field_record(native, schema),
                       native.usage, reserved_output=native.reserved_output, exchange=exchange, spec=native.spec)
    return recipe, mode


def _summed(replies: list[Any], asked: int) -> Any:
    """The row's answer: the last reply, its usage summed with the earlier asks' (same field names)."""
    last = replies[-1]
    if asked == 0 or not isinstance(last.data, dict):
        return last
    usage = last.data.get("usage")
    for earlier in replies[:-1]:
        before = earlier.data.get("usage") if isinstance(earlier.data, dict) else None
        if isinstance(usage, dict) and isinstance(before, dict):
            usage = {k: v + before[k] if isinstance(v, int) and isinstance(before.get(k), int) else v
                     for k, v in usage.items()}
    # the runner's Answer (frames/run/runner.py), remade: its text as received is no longer the answer's
    return dataclasses.replace(last, data={**last.data, "usage": usage, "gwlab_reasks": asked}, text=None,
                               reasks=asked)


def extract_columns(schema: Schema) -> dict[str, str]:
    """An extract run's answer columns: the schema's fields, then `__raw` and `__reasks`."""
    return {**dict.fromkeys(schema.fields, "object"), **EXTRACT_COLUMNS}


def field_record(base: RowRecipe, schema: Schema) -> Callable[[Any], dict[str, Any]]:
    """A row's fields (and `__raw`, `__reasks`) from its answer JSON, read in the family's form; an invalid
    answer raises AnswerInvalid whose `.record` keeps the raw text (paid for, so kept, but no value)."""
    form = base.family.structured_output or IN_PROMPT

    def record(data: Any) -> dict[str, Any]:
        answer = base.record(data)
        raw = form.answer_text(schema, answer.get("text"), answer.get("tool_calls") or [])
        meta = {"__raw": raw, "__reasks": data.get("gwlab_reasks", 0) if isinstance(data, Mapping) else 0}
        try:
            value = schema.parse(raw)
        except AnswerInvalid as exc:
            exc.record = meta
            raise
        plain = _plain(schema, value)
        problem = _beyond_a_column(schema, plain)
        if problem:
            beyond = AnswerInvalid(problem, raw)
            beyond.record = meta
            raise beyond
        return {**{field: plain.get(field) for field in schema.fields}, **meta}

    return record


_FIRST_DAY = dt.datetime(1677, 9, 22)  # the first midnight and the last instant datetime64[ns] holds
_LAST_INSTANT = dt.datetime(2262, 4, 11, 23, 47, 16)


def _plain(schema: Schema, value: Any) -> Any:
    return value.model_dump(mode="json") if schema.model is not None else value


def column_check(schema: Schema) -> Callable[[Any], None]:
    """The re-ask driver's check of a parsed answer: a date its column cannot hold is invalid (re-asked)."""
    def check(parsed: Any) -> None:
        problem = _beyond_a_column(schema, _plain(schema, parsed))
        if problem:
            raise AnswerInvalid(problem, None)
    return check


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
    """How a run asks for structured output: natively until the gateway refuses it, then in the prompt."""

    structured: Structured
    native: StructuredForm
    dialects: Any = None  # the gateway's DialectBook (client/dialect.py), reached through its Connection
    in_prompt: bool = dataclasses.field(init=False)
    evidence: str | None = dataclasses.field(default=None, init=False)  # why, when a refusal in this run said so

    def __post_init__(self) -> None:
        known = (self.structured == "auto" and self.dialects is not None
                 and self.dialects.structured_form(self.native) is IN_PROMPT)
        self.in_prompt = self.structured == "prompt" or known

    def form(self) -> StructuredForm:
        return IN_PROMPT if self.in_prompt else self.native

    def refused(self, error: BaseException) -> bool:
        """A row's native ask was refused: the run (and the gateway, remembered) asks in the prompt."""
        if self.in_prompt:
            return True
        if self.dialects is not None and not self.dialects.refused_form(self.native, error):
            return False
        self.in_prompt, self.evidence = True, f"{self.native.name} refused: {error}"
        return True

    def note(self) -> str | None:
        """What `.run` says when the schema went in the prompt; None when asked natively."""
        if not self.in_prompt:
            return None
        if self.structured == "prompt":
            return "asked in the prompt (structured='prompt')"
        source = self.dialects.dialect.source("structured_output") if self.dialects is not None else None
        why = self.evidence or (source.removeprefix("detected: ") if source else "known for this gateway")
        return f"asked in the prompt ({why})"


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
            answers[field] = pd.array(values, dtype=dtype)  # type: ignore[call-overload]  # pandas-stubs: dtype a Literal only, here a str from DTYPES
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
