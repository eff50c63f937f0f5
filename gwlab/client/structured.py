"""`schema=` on a single text call: ask in the family's structured-output form, validate, re-ask.

The family's row says the form (`structured_output`, a `StructuredForm` of gwlab/wire/structured/forms.py)
and the one re-ask driver (`wire/structured/driver.py`, which frame runs use too) asks, reads and asks
again, so this module names no family. A gateway known to refuse the native form (the dialect's
`structured_output`, learned here or by a frame run, shown by `repr(gw)`) is asked in the prompt; a first
refusal is answered once in the prompt and remembered. The result is the last answer with `.parsed` set
(a Pydantic instance when a model was given, else a dict). An answer still invalid after `max_reasks`
re-asks raises AnswerInvalid, its last reply on `.reply`.

Grounding (as `df.gw.extract`'s, gwlab/wire/grounding.py): `.grounding` maps each field the text may quote
to where the source text has it. The source is `source=` if given, else the user's text as passed (a
string, or the last user turn's text). `grounding="flag"` (default) keeps a value not found, "drop" makes it
None in `.parsed`, "off" aligns nothing (`.grounding` stays None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gwlab.client.dialect import DialectBook
from gwlab.errors import InvalidRequest
from gwlab.wire.families import ProtocolFamily
from gwlab.wire.grounding import UNGROUNDED, ground_fields
from gwlab.wire.schema import Schema
from gwlab.wire.structured.driver import Asking, converse

__all__ = ["ask"]


async def ask(create: Callable[..., Awaitable[Any]], family: ProtocolFamily, messages: str | Sequence[Any],
              schema: Any, params: Mapping[str, Any], max_reasks: int, dialects: DialectBook) -> Any:
    """`create(messages, **fields)` until its answer validates against `schema` (at most
    1 + `max_reasks` answers); `dialects` is the gateway's (what it is known to refuse)."""
    if not isinstance(max_reasks, int) or isinstance(max_reasks, bool) or max_reasks < 0:
        raise InvalidRequest("max_reasks", f"a non-negative integer; got {max_reasks!r}")
    params = dict(params)
    mode, source = params.pop("grounding", "flag"), params.pop("source", None)
    if mode not in ("flag", "drop", "off"):
        raise InvalidRequest("grounding", f"one of flag, drop, off; got {mode!r}")
    if source is not None and not isinstance(source, str):
        raise InvalidRequest("source", f"the text the values are grounded in, a string; got {type(source).__name__}")
    shape, native = Schema.of(schema), family.structured_output
    assert native is not None, "ask() serves the text families, each with a native structured form"
    clash = next((key for key in shape.request_fields(native) if key in params), None)
    if clash is not None:
        raise InvalidRequest(clash, "set by schema=; pass one or the other")

    async def send(turns: list[Any], fields: dict[str, Any]) -> Any:
        return await create(turns, **params, **fields)

    asking = Asking(shape, dialects.structured_form(native), max_reasks,
                    on_refused=lambda error: dialects.refused_form(native, error))
    done = await converse(asking, messages, send, _text_and_calls)
    reply, parsed = done.reply, done.parsed
    if mode == "off":
        return dataclasses.replace(reply, parsed=parsed)
    found = _grounded(parsed, shape, source if source is not None else _user_text(messages))
    return dataclasses.replace(reply, parsed=_drop(parsed, found) if mode == "drop" else parsed, grounding=found)


def _text_and_calls(reply: Any) -> tuple[str | None, list[dict[str, Any]]]:
    return reply.text, [{"name": c.name, "arguments": _arguments(c)} for c in reply.tool_calls]


def _grounded(parsed: Any, shape: Schema, text: str | None) -> dict[str, Any]:
    values = parsed.model_dump(mode="json") if shape.model is not None else parsed
    return ground_fields(values, text, shape.json["properties"])


def _drop(parsed: Any, found: Mapping[str, Any]) -> Any:
    """The answer with each ungrounded value (not found in the text, or misplaced) made None."""
    lost = {field: None for field, g in found.items() if g is not None and g.status in UNGROUNDED}
    if not lost:
        return parsed
    return parsed.model_copy(update=lost) if hasattr(parsed, "model_copy") else {**parsed, **lost}


def _user_text(messages: str | Sequence[Any]) -> str | None:
    """The user's text as given: the string, or the last user turn whose content is a string."""
    if isinstance(messages, str):
        return messages
    for turn in reversed(list(messages)):
        content = turn.get("content") if isinstance(turn, Mapping) and turn.get("role") == "user" else None
        if isinstance(content, str):
            return content
    return None


def _arguments(call: Any) -> Any:
    arguments = getattr(call, "arguments", None)
    return getattr(call, "input", None) if arguments is None else arguments
