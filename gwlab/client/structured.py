"""`schema=` on a single text call: ask in the family's structured-output form, validate, re-ask.

The family's row says the form (`structured_output`, gwlab/wire/families.py); `gwlab.wire.schema`
turns it into request fields and reads the answer, so this module names no family. The result is the
last answer with `.parsed` set (a Pydantic instance when a model was given, else a dict). An answer
still invalid after `max_reasks` re-asks raises AnswerInvalid, its last reply on `.reply`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire.families import ProtocolFamily
from gwlab.wire.schema import AnswerInvalid, Schema

__all__ = ["ask"]


async def ask(create: Callable[..., Awaitable[Any]], family: ProtocolFamily, messages: str | Sequence[Any],
              schema: Any, params: Mapping[str, Any], max_reasks: int) -> Any:
    """`create(messages, **fields)` until its answer validates against `schema` (at most
    1 + `max_reasks` requests)."""
    if not isinstance(max_reasks, int) or isinstance(max_reasks, bool) or max_reasks < 0:
        raise InvalidRequest("max_reasks", f"a non-negative integer; got {max_reasks!r}")
    shape = Schema.of(schema)
    asks = shape.request_fields(family.structured_output)
    clash = next((key for key in asks if key in params), None)
    if clash is not None:
        raise InvalidRequest(clash, "set by schema=; pass one or the other")
    turns = _with_rule(messages, shape.absent_rule())
    for asked in range(max_reasks + 1):
        reply = await create(turns, **params, **asks)
        calls = [{"name": c.name, "arguments": _arguments(c)} for c in reply.tool_calls]
        try:
            return dataclasses.replace(reply, parsed=shape.parse(shape.answer_text(family.structured_output,
                                                                                   reply.text, calls)))
        except AnswerInvalid as exc:
            if asked == max_reasks:
                exc.reply = reply  # type: ignore[attr-defined]
                raise
            turns = [*turns, *Schema.reask_turns(exc)]
    raise AssertionError("unreachable")


def _with_rule(messages: str | Sequence[Any], rule: str | None) -> list[Any]:
    """The turns, with the schema's rule for optional fields (null when the text does not state one)
    after the user's last text, as `df.gw.extract` sends it: a grammar alone lets a small model guess."""
    turns = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    if rule is None:
        return turns
    last = turns[-1] if turns else None
    if isinstance(last, Mapping) and last.get("role") == "user" and isinstance(last.get("content"), str):
        return [*turns[:-1], {**last, "content": f"{last['content']}\n\n{rule}"}]
    return [*turns, {"role": "user", "content": rule}]


def _arguments(call: Any) -> Any:
    arguments = getattr(call, "arguments", None)
    return getattr(call, "input", None) if arguments is None else arguments
