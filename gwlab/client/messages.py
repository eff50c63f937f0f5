"""The messages-compatible family: `POST /messages`, with its own auth (x-api-key + version)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.client import structured
from gwlab.client.loop import LoopThread
from gwlab.client.streams import AsyncEventStream, EventStream
from gwlab.client.transport.core import AsyncTransport, Headers
from gwlab.errors import InvalidRequest
from gwlab.wire import messages as wire
from gwlab.wire.families import FAMILIES
from gwlab.wire.messages import Message, MessageEvent
from gwlab.wire.models import default_model
from gwlab.wire.schema import DEFAULT_MAX_REASKS
from gwlab.wire.sse import UnknownEvent

__all__ = ["AsyncMessages", "AsyncMessagesStream", "Messages", "MessagesStream"]

AsyncMessagesStream = AsyncEventStream[MessageEvent | UnknownEvent, Message]
MessagesStream = EventStream[MessageEvent | UnknownEvent, Message]
Conversation = str | Sequence[Mapping[str, Any]]
MESSAGES = FAMILIES["messages"]  # the family's row: path, method, default model


class AsyncMessages:
    """Messages: `create` and `stream` (ended only at `message_stop` after a stop_reason; `.ending` says
    how: gwlab/wire/endings.py). Extra headers such as
    `anthropic-beta` go in `extra_headers`; system text in `system=`."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def create(self, messages: Conversation, *, model: str | None = None, max_tokens: int,
                     extra_headers: Headers = None, schema: Any = None,
                     max_reasks: int = DEFAULT_MAX_REASKS, **params: Any) -> Message:
        if schema is not None:  # JSON of the schema, validated and re-asked: `.parsed` (client/structured.py)
            def again(turns: Any, **fields: Any) -> Any:
                return self.create(turns, model=model, max_tokens=max_tokens, extra_headers=extra_headers, **fields)

            answer: Message = await structured.ask(again, MESSAGES, messages, schema, params, max_reasks,
                                                   self._transport.dialects)
            return answer
        if params.pop("stream", None):
            raise InvalidRequest("stream", "use gw.messages.stream(...) for a stream")
        model = default_model(model, MESSAGES.ability)
        body = wire.build_request(messages, model=model, max_tokens=max_tokens, **params)
        return await self._transport.request(MESSAGES.method, MESSAGES.path, family=MESSAGES.name, json=body,
                                             headers=extra_headers, parse=wire.parse_response)

    async def stream(self, messages: Conversation, *, model: str | None = None, max_tokens: int,
                     allow_partial: bool = False, extra_headers: Headers = None,
                     **params: Any) -> AsyncMessagesStream:
        params.pop("stream", None)
        model = default_model(model, MESSAGES.ability)
        body = wire.build_request(messages, model=model, max_tokens=max_tokens, stream=True, **params)
        return await self._transport.stream(MESSAGES.method, MESSAGES.path, family=MESSAGES.name, json=body,
                                            headers=extra_headers, accumulator=wire.MessagesAccumulator(),
                                            parse=wire.parse_response, allow_partial=allow_partial)


class Messages:
    def __init__(self, twin: AsyncMessages, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, messages: Conversation, *, model: str | None = None, max_tokens: int,
               extra_headers: Headers = None, schema: Any = None, max_reasks: int = DEFAULT_MAX_REASKS,
               **params: Any) -> Message:
        return self._loop.run(self._twin.create(messages, model=model, max_tokens=max_tokens,
                                                extra_headers=extra_headers, schema=schema, max_reasks=max_reasks,
                                                **params))

    def stream(self, messages: Conversation, *, model: str | None = None, max_tokens: int,
               allow_partial: bool = False, extra_headers: Headers = None, **params: Any) -> MessagesStream:
        return EventStream(self._loop.run(self._twin.stream(
            messages, model=model, max_tokens=max_tokens, allow_partial=allow_partial,
            extra_headers=extra_headers, **params)), self._loop)
