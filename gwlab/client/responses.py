"""The responses family: `POST /responses` (whole or streamed) and `GET /responses/{id}`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.client import structured
from gwlab.client.loop import LoopThread
from gwlab.client.streams import AsyncEventStream, EventStream
from gwlab.client.transport.core import AsyncTransport, Headers
from gwlab.errors import InvalidRequest
from gwlab.wire import responses
from gwlab.wire.families import FAMILIES
from gwlab.wire.models import default_model
from gwlab.wire.responses import Response, ResponseEvent
from gwlab.wire.schema import DEFAULT_MAX_REASKS
from gwlab.wire.sse import UnknownEvent

__all__ = ["AsyncResponses", "AsyncResponsesStream", "Responses", "ResponsesStream"]
RESPONSES = FAMILIES["responses"]

AsyncResponsesStream = AsyncEventStream[ResponseEvent | UnknownEvent, Response]
ResponsesStream = EventStream[ResponseEvent | UnknownEvent, Response]
Input = str | Sequence[Mapping[str, Any]]


class AsyncResponses:
    """Responses: `create`, `stream` (complete only at `response.completed`), `retrieve`.

    With `previous_response_id`, send only the new items and set `instructions` again: they are
    not inherited (spec, migration rule 2)."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def create(self, input: Input, *, model: str | None = None, extra_headers: Headers = None, schema: Any = None,
                     max_reasks: int = DEFAULT_MAX_REASKS,
                     **params: Any) -> Response:
        if schema is not None:  # JSON of the schema, validated and re-asked: `.parsed` (client/structured.py)
            def again(turns: Any, **fields: Any) -> Any:
                return self.create(turns, model=model, extra_headers=extra_headers, **fields)

            answer: Response = await structured.ask(again, RESPONSES, input, schema, params, max_reasks,
                                                    self._transport.dialects)
            return answer
        if params.pop("stream", None):
            raise InvalidRequest("stream", "use gw.responses.stream(...) for a stream")
        body = responses.build_request(input, model=default_model(model, RESPONSES.ability), **params)
        return await self._transport.request(RESPONSES.method, RESPONSES.path, family=RESPONSES.name, json=body,
                                             headers=extra_headers, parse=responses.parse_response)

    async def stream(self, input: Input, *, model: str | None = None, allow_partial: bool = False,
                     extra_headers: Headers = None, **params: Any) -> AsyncResponsesStream:
        params.pop("stream", None)
        body = responses.build_request(input, model=default_model(model, RESPONSES.ability), stream=True, **params)
        return await self._transport.stream(RESPONSES.method, RESPONSES.path, family=RESPONSES.name, json=body,
                                            headers=extra_headers, parse=responses.parse_response,
                                            accumulator=responses.ResponsesAccumulator(),
                                            allow_partial=allow_partial)

    async def retrieve(self, response_id: str) -> Response:
        """A stored response by its id."""
        if not isinstance(response_id, str) or not response_id:
            raise InvalidRequest("response_id", "required")
        return await self._transport.request("GET", RESPONSES.path + "/{response_id}", family=RESPONSES.name,
                                             path_params={"response_id": response_id},
                                             parse=responses.parse_response)


class Responses:
    def __init__(self, twin: AsyncResponses, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, input: Input, *, model: str | None = None, extra_headers: Headers = None,
               schema: Any = None, max_reasks: int = DEFAULT_MAX_REASKS, **params: Any) -> Response:
        return self._loop.run(self._twin.create(input, model=model, extra_headers=extra_headers, schema=schema,
                                                max_reasks=max_reasks, **params))

    def stream(self, input: Input, *, model: str | None = None, allow_partial: bool = False,
               extra_headers: Headers = None, **params: Any) -> ResponsesStream:
        return EventStream(self._loop.run(self._twin.stream(
            input, model=model, allow_partial=allow_partial, extra_headers=extra_headers, **params)),
            self._loop)

    def retrieve(self, response_id: str) -> Response:
        return self._loop.run(self._twin.retrieve(response_id))
