"""Event streams: typed events over one SSE answer, async, and its sync twin on the loop thread.

A stream has ended only when its family's end marker arrived with the reason the protocol requires:
`[DONE]` after every choice carried a finish_reason, a terminal `response.*` event, `message_stop`
after a stop_reason. Otherwise it ends in one of two ways, decided once, at its end: the gateway
reported an error inside the stream (StreamError), or the answer was cut -- the connection dropped,
the body ended early, or the end marker came without its reason, as llama-cpp-python's server does
when a second request arrives (StreamInterrupted, unless the caller opted out with
`allow_partial=True`). Events that arrived before are yielded first; `text`, `result` and `events`
keep the partial answer in every case.

`ending` says how the answer ended in the vocabulary of gwlab/wire/endings.py (complete, capped,
filtered, refused, other, interrupted, stopped, failed), the same word the ledger records; `complete`
is true only for `complete`: a capped answer is not.

The sync twin pulls a batch of events per network chunk through the loop thread, not one event
per hop, and has no logic of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import httpx

from gwlab import errors
from gwlab.wire.endings import COMPLETE, INTERRUPTED, STOPPED
from gwlab.wire.sse import Event, SSEDecoder

if TYPE_CHECKING:
    from gwlab.client.ledger import CallRecord, Ledger
    from gwlab.client.loop import LoopThread

__all__ = ["Accumulator", "AsyncEventStream", "EventStream"]

E = TypeVar("E")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)  # a protocol's type that is only returned must be covariant


class Accumulator(Protocol[E, R_co]):
    """What a family's wire accumulator offers (chat, responses, messages)."""

    events: list[E]
    error: Any

    @property
    def status(self) -> str: ...  # in_progress | completed | failed | incomplete | interrupted | error

    @property
    def ending(self) -> str: ...  # gwlab/wire/endings.py

    @property
    def complete(self) -> bool: ...

    @property
    def text(self) -> str: ...

    @property
    def tool_calls(self) -> list[Any]: ...

    @property
    def usage(self) -> Any: ...

    def add(self, event: Event) -> list[E]: ...

    def result(self) -> R_co: ...


class AsyncEventStream(Generic[E, R]):
    """Async iterator of typed events; `result` is the typed answer as far as it arrived."""

    def __init__(self, response: httpx.Response, call: CallRecord, accumulator: Accumulator[E, R], *,
                 ledger: Ledger, allow_partial: bool = False, deadline_at: float | None = None,
                 deadline_s: float | None = None) -> None:
        self._ledger = ledger  # where the call's row goes when the stream ends, however it ends
        self._deadline_s = deadline_s
        self._response = response
        self._call = call
        self._acc = accumulator
        self._allow_partial = allow_partial
        self._deadline_at = deadline_at
        self._chunks: AsyncIterator[bytes] = response.aiter_bytes()
        self._decoder = SSEDecoder()
        self._finished = False
        self._stopped = False  # closed by the caller before its end
        self._raise: BaseException | None = None
        self._override: R | None = None
        self.request_id: str | None = call.request_id

    # -- what arrived so far ---------------------------------------------------------------------

    @property
    def events(self) -> list[E]:
        return self._acc.events

    @property
    def text(self) -> str:
        return self._acc.text if self._override is None else getattr(self._override, "text", "")

    @property
    def tool_calls(self) -> list[Any]:
        return self._acc.tool_calls if self._override is None else getattr(self._override, "tool_calls", [])

    @property
    def usage(self) -> Any:
        return self._acc.usage if self._override is None else getattr(self._override, "usage", None)

    @property
    def complete(self) -> bool:
        """The model ended its answer (ending `complete`); false for capped, cut or failed ones."""
        return self.ending == COMPLETE

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py); `interrupted` while it is still arriving."""
        if self._override is not None:
            return getattr(self._override, "ending", COMPLETE)
        if self._stopped:
            return STOPPED
        return self._acc.ending

    @property
    def status(self) -> str:
        """in_progress | completed | failed | incomplete | error | interrupted (the protocol's word;
        `ending` is gwlab's, the same for every family)."""
        if self._override is not None:
            return "completed"
        if self._finished and self._acc.status == "in_progress":
            return "interrupted"
        return self._acc.status

    @property
    def error(self) -> Any:
        return self._acc.error

    @property
    def result(self) -> R:
        if self._override is not None:
            return self._override
        result = self._acc.result()
        if self.request_id is not None and dataclasses.is_dataclass(result) and hasattr(result, "request_id"):
            result = dataclasses.replace(result, request_id=self.request_id)  # type: ignore[type-var]  # is_dataclass: above
        return result

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(status={self.status!r}, events={len(self.events)}, "
                f"text={self.text[:40]!r})")

    # -- iteration -------------------------------------------------------------------------------

    async def __aiter__(self) -> AsyncIterator[E]:
        while True:
            batch = await self._next_batch()
            if not batch:
                return
            for event in batch:
                yield event

    async def collect(self) -> R:
        """Read to the end; the typed result (raises as iteration would)."""
        while await self._next_batch():
            pass
        return self.result

    async def aclose(self) -> None:
        """Stop reading; a stream closed before its end is recorded as not complete."""
        if not self._finished:
            self._finished = self._stopped = True
            self._call.record(self._ledger, usage=self._acc.usage, ending=STOPPED)
        await self._response.aclose()

    async def __aenter__(self) -> AsyncEventStream[E, R]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _next_batch(self) -> list[E]:
        """The events of the next network chunk that yields any; [] once the stream has ended
        (after raising its outcome once, if it has one)."""
        acc = self._acc
        while not self._finished:
            try:
                if self._deadline_at is None:
                    chunk = await anext(self._chunks, None)
                else:
                    async with asyncio.timeout_at(self._deadline_at):
                        chunk = await anext(self._chunks, None)
            except httpx.HTTPError as exc:
                await self._conclude(cut=exc)
                break
            except TimeoutError:
                await self._conclude(cut=f"the overall deadline of {self._deadline_s}s passed")
                break
            if chunk is None:
                self._decoder.close()
                await self._conclude(cut="the stream ended before its end marker")
                break
            batch: list[E] = []
            for event in self._decoder.feed(chunk):
                batch += acc.add(event)
                if acc.status != "in_progress":
                    await self._conclude()
                    break
            if batch:
                return batch
        if self._raise is not None:
            failure, self._raise = self._raise, None
            raise failure
        return []

    async def _conclude(self, cut: BaseException | str | None = None) -> None:
        """Decide the outcome once: record the call, close the response, keep the error to raise."""
        self._finished = True
        acc, call = self._acc, self._call
        status = acc.status
        failure: BaseException | None = None
        if status in ("error", "failed"):
            message = _error_message(acc.error) or status
            failure = self._raise = errors.StreamError(
                message, error=acc.error, event=status, partial=self.result, method=call.method,
                path=call.path, request_id=call.request_id)
        elif status in ("in_progress", INTERRUPTED):
            if cut is None:
                cut = "the end marker arrived before the answer's end reason (a finish_reason or stop_reason)"
            reason = cut if isinstance(cut, str) else f"{type(cut).__name__}: {cut}"
            failure = errors.StreamInterrupted(
                f"stream interrupted ({reason}); the partial answer is in .partial",
                partial=self.result, method=call.method, path=call.path, request_id=call.request_id)
            if isinstance(cut, BaseException):
                failure.__cause__ = cut
            if not self._allow_partial:
                self._raise = failure
        call.record(self._ledger, usage=acc.usage, ending=acc.ending, error=failure)
        await self._response.aclose()

    @classmethod
    def answered(cls, response: httpx.Response, call: CallRecord, accumulator: Accumulator[E, R], result: R, *,
                 ledger: Ledger) -> AsyncEventStream[E, R]:
        """The stream of a request the gateway answered with a whole JSON body (`result`): already complete,
        nothing left to read, its ledger row written."""
        stream = cls(response, call, accumulator, ledger=ledger)
        stream._override, stream._finished = result, True
        call.record(ledger, usage=getattr(result, "usage", None), ending=getattr(result, "ending", COMPLETE))
        return stream


def _error_message(error: Any) -> str | None:
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


class EventStream(Generic[E, R]):
    """The sync twin: iterates on the caller's thread, reads on the loop thread."""

    def __init__(self, twin: AsyncEventStream[E, R], loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def __iter__(self) -> Iterator[E]:
        while batch := self._loop.run(self._twin._next_batch()):
            yield from batch

    def collect(self) -> R:
        return self._loop.run(self._twin.collect())

    def close(self) -> None:
        self._loop.run(self._twin.aclose())

    def __enter__(self) -> EventStream[E, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._twin).replace("AsyncEventStream", "EventStream", 1)

    @property
    def events(self) -> list[E]:
        return self._twin.events

    @property
    def text(self) -> str:
        return self._twin.text

    @property
    def tool_calls(self) -> list[Any]:
        return self._twin.tool_calls

    @property
    def usage(self) -> Any:
        return self._twin.usage

    @property
    def complete(self) -> bool:
        return self._twin.complete

    @property
    def ending(self) -> str:
        return self._twin.ending

    @property
    def status(self) -> str:
        return self._twin.status

    @property
    def error(self) -> Any:
        return self._twin.error

    @property
    def result(self) -> R:
        return self._twin.result

    @property
    def request_id(self) -> str | None:
        return self._twin.request_id
