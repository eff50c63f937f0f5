"""The decisions family: `POST /decisions`, validated here before anything is sent.

Every caller asks for the spec's route and shape; the transport's dialect (client.dialect) sends it to
`/systemone` or in OpenAI's decisions shape where a gateway needs that, and reads the answer back.

Retries: a decision request has no side effect but billing its input tokens (spec, Decision response
rule 2), so asking again is idempotent: the transport's policy treats the decisions family like chat
(limited resends on 408/409/429/5xx and on a lost connection, never beyond `max_retries`). A resend
after a lost answer may bill the input tokens twice; that is the price of the answer, as for chat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.client.loop import LoopThread
from gwlab.client.transport.core import AsyncTransport
from gwlab.wire import decisions
from gwlab.wire.decisions import DecisionResult, Question
from gwlab.wire.families import FAMILIES
from gwlab.wire.models import default_model

__all__ = ["AsyncDecisions", "Decisions", "Questions", "State"]

DECISIONS = FAMILIES["decisions"]
State = str | Mapping[str, Any] | Sequence[Any]
Questions = Mapping[str, Mapping[str, Any] | Question]


class AsyncDecisions:
    """`await gw.decisions.create(state, questions, model=...)`: typed answers keyed like `questions`."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def create(self, state: State, questions: Questions, *, model: str | None = None,
                     **extra: Any) -> DecisionResult:
        """Answer every question about `state` in one request.

        Without `model`, the decision model (`gwlab.wire.models.DEFAULT_MODELS`), as every call.
        An invalid request raises `InvalidRequest` naming the field and never leaves this process;
        `extra` rides along as top-level fields (None ones omitted).
        """
        model = default_model(model, DECISIONS.ability)
        body = decisions.build_request(state, questions, model, **extra)  # strict writer: refuse here
        return await self._transport.request(DECISIONS.method, DECISIONS.path, family=DECISIONS.name, json=body,
                                             parse=decisions.parse_response)


class Decisions:
    def __init__(self, twin: AsyncDecisions, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, state: State, questions: Questions, *, model: str | None = None,
               **extra: Any) -> DecisionResult:
        return self._loop.run(self._twin.create(state, questions, model=model, **extra))
