"""The chat family: `POST /chat/completions`, whole or streamed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.client import structured
from gwlab.client.loop import LoopThread
from gwlab.client.streams import AsyncEventStream, EventStream
from gwlab.client.transport.core import AsyncTransport, Headers
from gwlab.errors import InvalidRequest
from gwlab.wire import chat
from gwlab.wire.chat import ChatChunk, ChatCompletion
from gwlab.wire.families import FAMILIES
from gwlab.wire.models import default_model
from gwlab.wire.schema import DEFAULT_MAX_REASKS
from gwlab.wire.sse import UnknownEvent

__all__ = ["AsyncChat", "AsyncChatStream", "Chat", "ChatStream"]

AsyncChatStream = AsyncEventStream[ChatChunk | UnknownEvent, ChatCompletion]
ChatStream = EventStream[ChatChunk | UnknownEvent, ChatCompletion]
Messages = str | Sequence[Mapping[str, Any]]
CHAT = FAMILIES["chat"]


class AsyncChat:
    """`await gw.chat(messages, model=...)` is `create`; `stream` yields chunks as they arrive."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def __call__(self, messages: Messages, *, model: str | None = None, extra_headers: Headers = None,
                       **params: Any) -> ChatCompletion:
        return await self.create(messages, model=model, extra_headers=extra_headers, **params)

    async def create(self, messages: Messages, *, model: str | None = None, extra_headers: Headers = None,
                     schema: Any = None, max_reasks: int = DEFAULT_MAX_REASKS, **params: Any) -> ChatCompletion:
        """One completion; `params` are chat fields (tools, temperature, ...), None ones omitted."""
        if schema is not None:  # JSON of the schema, validated and re-asked: `.parsed` (client/structured.py)
            def again(turns: Any, **fields: Any) -> Any:
                return self.create(turns, model=model, extra_headers=extra_headers, **fields)

            answer: ChatCompletion = await structured.ask(again, CHAT, messages, schema, params, max_reasks,
                                                          self._transport.dialects)
            return answer
        if params.pop("stream", None):
            raise InvalidRequest("stream", "use gw.chat.stream(...) for a stream")
        body = chat.build_request(messages, model=default_model(model, CHAT.ability), **params)
        return await self._transport.request(CHAT.method, CHAT.path, family=CHAT.name, json=body, headers=extra_headers,
                                             parse=chat.parse_response)

    async def stream(self, messages: Messages, *, model: str | None = None, allow_partial: bool = False,
                     extra_headers: Headers = None, **params: Any) -> AsyncChatStream:
        """A stream of chunks; ended only at `[DONE]` after every choice's finish_reason. A cut (or a bare
        `[DONE]` before them) raises StreamInterrupted at the end of iteration unless `allow_partial=True`
        (then check `.ending`: complete, capped, interrupted, ...; gwlab/wire/endings.py)."""
        params.pop("stream", None)
        body = chat.build_request(messages, model=default_model(model, CHAT.ability), stream=True, **params)
        return await self._transport.stream(CHAT.method, CHAT.path, family=CHAT.name, json=body, headers=extra_headers,
                                            accumulator=chat.ChatAccumulator(), parse=chat.parse_response,
                                            allow_partial=allow_partial)


class Chat:
    def __init__(self, twin: AsyncChat, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def __call__(self, messages: Messages, *, model: str | None = None, extra_headers: Headers = None,
                 **params: Any) -> ChatCompletion:
        return self._loop.run(self._twin(messages, model=model, extra_headers=extra_headers, **params))

    def create(self, messages: Messages, *, model: str | None = None, extra_headers: Headers = None,
               schema: Any = None, max_reasks: int = DEFAULT_MAX_REASKS, **params: Any) -> ChatCompletion:
        return self._loop.run(self._twin.create(messages, model=model, extra_headers=extra_headers, schema=schema,
                                                max_reasks=max_reasks, **params))

    def stream(self, messages: Messages, *, model: str | None = None, allow_partial: bool = False,
               extra_headers: Headers = None, **params: Any) -> ChatStream:
        return EventStream(self._loop.run(self._twin.stream(
            messages, model=model, allow_partial=allow_partial, extra_headers=extra_headers, **params)),
            self._loop)
