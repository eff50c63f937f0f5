"""The one re-ask driver: ask for JSON of a schema in a form, validate, ask again with the error shown.

Single calls (`client/structured.py`) and frame runs (`frames/extract.py`) both drive their requests
through `converse`: it holds the order of things (the form's prompt text after the user's last text, the
request fields, the answer read where the form puts it, the re-ask turns, and a refusal of the native
form answered once by the same turns in the prompt), while the caller only sends. Pure: the sending is
the caller's `send`, so this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gwlab.errors import AnswerInvalid
from gwlab.wire.schema import Schema
from gwlab.wire.structured.forms import IN_PROMPT, StructuredForm

__all__ = ["Asking", "Exchange", "converse", "first_turns"]

R = TypeVar("R")
Turns = list[Any]
Calls = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Asking:
    """What is asked: the schema, the form to ask it in, how often an invalid answer is asked again, and
    what to do when the gateway refuses the form: True to ask in the prompt instead (None: raise); `check`:
    what the caller needs of a parsed answer beyond the schema (raises AnswerInvalid: re-asked likewise)."""

    schema: Schema
    form: StructuredForm
    max_reasks: int
    on_refused: Callable[[BaseException], bool] | None = None
    check: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class Exchange(Generic[R]):
    """A conversation that ended with a valid answer: the last reply, its parsed answer, every reply paid
    for (the refused ask is none: it never ran), the re-asks it took and the form it ended in."""

    reply: R
    parsed: Any
    replies: list[R] = field(default_factory=list)
    asked: int = 0
    form: StructuredForm = IN_PROMPT


async def converse(asking: Asking, messages: str | Sequence[Any],
                   send: Callable[[Turns, dict[str, Any]], Awaitable[R]],
                   read: Callable[[R], tuple[str | None, Calls]]) -> Exchange[R]:
    """Send `messages` (a user text or turns) with the form's fields until the answer validates: at most
    1 + `max_reasks` replies. Still invalid: AnswerInvalid, with `.reply` (the last), `.replies` and
    `.asked`. `send(turns, fields)` makes one request; `read(reply)` gives its text and tool calls."""
    form, schema = asking.form, asking.schema
    turns, asked = first_turns(form, schema, messages), 0
    replies: list[R] = []
    while True:
        try:
            reply = await send(turns, form.request_fields(schema))
        except Exception as exc:
            if asking.on_refused is None or replies or not form.refused(exc) or not asking.on_refused(exc):
                raise
            # a request that never ran: asked again with the schema in the prompt, nothing billed
            form, turns = IN_PROMPT, first_turns(IN_PROMPT, schema, messages)
            continue
        replies.append(reply)
        try:
            parsed = schema.parse(form.answer_text(schema, *read(reply)))
            if asking.check is not None:
                asking.check(parsed)
        except AnswerInvalid as exc:
            if asked >= asking.max_reasks:
                exc.reply, exc.replies, exc.asked = reply, replies, asked
                raise
            asked += 1
            turns = [*turns, *form.reask_turns(exc)]
            continue
        return Exchange(reply, parsed, replies, asked, form)


def first_turns(form: StructuredForm, schema: Schema, messages: str | Sequence[Any]) -> Turns:
    """The turns, with the form's prompt text (`StructuredForm.instructions`) after the user's last text."""
    turns = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    rule = form.instructions(schema)
    if rule is None:
        return turns
    last = turns[-1] if turns else None
    if isinstance(last, Mapping) and last.get("role") == "user" and isinstance(last.get("content"), str):
        return [*turns[:-1], {**last, "content": f"{last['content']}\n\n{rule}"}]
    return [*turns, {"role": "user", "content": rule}]
