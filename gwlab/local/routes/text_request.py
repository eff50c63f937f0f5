"""What the three text routes (chat, responses, messages) do before any token, in one order: read the body,
check the model for the key, count the tools, parse the body (each route's own `parse`), then refuse a token
cap over the gateway's limit and compile the grammars, so every refusal is a 400 before generation starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fastapi import Request

from gwlab.local import textgen
from gwlab.local.auth import require_model
from gwlab.local.body import read_json
from gwlab.local.store import KeyRecord
from gwlab.wire.families import ProtocolFamily

__all__ = ["TextRoute", "TextRun", "accept"]


class TextRun(Protocol):
    """A parsed text request as the local model runs it (`ChatRun`, `ResponsesRun`, `MessagesRun`)."""

    @property
    def conversation(self) -> textgen.Conversation: ...
    @property
    def plan(self) -> textgen.Plan: ...
    @property
    def params(self) -> Mapping[str, str]: ...  # where each schema sat in the body, for grammar errors


R = TypeVar("R", bound=TextRun)


@dataclass(frozen=True, slots=True)
class TextRoute:
    """A text family as its route checks it."""

    family: ProtocolFamily  # its row: the family the model must support, its token cap field
    input_param: str  # where the conversation sits in the body: "messages" or "input"
    cap_fields: tuple[str, ...] = ()  # where the token cap has several names, the preferred first (chat's)

    def cap_field(self, body: Mapping[str, Any]) -> str:
        """The token cap's name as the body gave it, so a refusal names the field the caller sent."""
        names = self.cap_fields or (str(self.family.token_cap),)
        return next((name for name in names if name in body), names[0])


async def accept(request: Request, key: KeyRecord, route: TextRoute, parse: Callable[[dict[str, Any], str], R]
                 ) -> R:
    """The body parsed by `parse(body, model_id)` and checked against the gateway's limits, its grammars
    compiled; `request.state.model` set for the request log."""
    body = await read_json(request)
    info = require_model(key, body.get("model"), route.family.name)
    request.state.model = info.id
    limits = request.app.state.settings.limits
    textgen.check_tools(body, limits)
    run = parse(body, info.id)
    textgen.check_tokens(run.plan, limits, cap_field=route.cap_field(body))
    await textgen.prepare(run.plan, run.params, run.conversation, route.input_param)
    return run
