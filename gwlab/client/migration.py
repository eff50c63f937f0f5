"""Chat completions → responses on a live gateway: the spec's migration table (`wire.migration`), sent.

The conversions are pure and live in `wire.migration`; this module offers them on the gateway
(`gw.migrate`, one stateless object for both faces) and sends a chat-shaped request through the
responses protocol (`gw.responses_from_chat`), returning both views so a notebook can compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gwlab.client.responses import AsyncResponses
from gwlab.wire import chat, migration
from gwlab.wire.chat import ChatCompletion
from gwlab.wire.responses import Response

__all__ = ["Migrate", "Migrated", "responses_from_chat"]


@dataclass(frozen=True, slots=True)
class Migrated:
    """One chat-shaped request answered through responses: the request sent, both views of the answer,
    and the chat fields that went through without a mapping (`unmapped`)."""

    request: dict[str, Any] = field(repr=False)
    response: Response
    chat: ChatCompletion
    unmapped: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.response.text


def _body(result: Any) -> Mapping[str, Any]:
    """The JSON body of a typed result (kept in `raw`), or the mapping given."""
    raw = getattr(result, "raw", result)
    return raw if isinstance(raw, Mapping) else {}


class Migrate:
    """`gw.migrate`: the migration table as functions. Pure, so one object serves both gateways."""

    def chat_to_responses(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The responses request equivalent to a chat completions request."""
        return migration.chat_request_to_responses(request)

    def unmapped(self, request: Mapping[str, Any]) -> list[str]:
        """Fields of a chat request that `chat_to_responses` passed through without an equivalent."""
        return migration.unmapped_request_fields(request)

    def result_to_chat(self, response: Response | Mapping[str, Any]) -> dict[str, Any]:
        """A responses result presented as a chat completion (unmapped items kept, not dropped)."""
        return migration.responses_result_to_chat(_body(response))

    def result_to_responses(self, completion: ChatCompletion | Mapping[str, Any]) -> dict[str, Any]:
        """A chat completion presented as a responses object."""
        return migration.chat_result_to_responses(_body(completion))

    def __repr__(self) -> str:
        return "Migrate()"


async def responses_from_chat(responses: AsyncResponses, **chat_kwargs: Any) -> Migrated:
    """Send chat keyword arguments (messages, model, max_completion_tokens, tools, ...) as one responses
    request and return both views; the chat request is validated as chat first (`gw.responses_from_chat`)."""
    request = chat.build_request(**chat_kwargs)  # strict writer: a bad chat request fails as chat
    body = migration.chat_request_to_responses(request)
    params = {key: value for key, value in body.items() if key not in ("input", "model")}
    response = await responses.create(body["input"], model=body["model"], **params)
    view = chat.parse_response(migration.responses_result_to_chat(response.raw), response.request_id)
    return Migrated(body, response, view, migration.unmapped_request_fields(request))
