"""The embeddings family: `POST /embeddings` (OpenAI's shape), validated here before anything is sent.

Resends: an embeddings request has no side effect but billing its input tokens, so the family row marks
it idempotent, as chat and decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gwlab.client.loop import LoopThread
from gwlab.client.transport.core import AsyncTransport
from gwlab.wire import embeddings
from gwlab.wire.embeddings import EmbeddingsResult
from gwlab.wire.families import FAMILIES
from gwlab.wire.models import default_model

__all__ = ["AsyncEmbeddings", "Embeddings"]

EMBEDDINGS = FAMILIES["embeddings"]


class AsyncEmbeddings:
    """`await gw.embeddings.create(input, model=...)`: one vector per input text, in order."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def create(self, input: str | Sequence[str], *, model: str | None = None,
                     **extra: Any) -> EmbeddingsResult:
        """Vectors for `input` (a string or a list of strings). Without `model`, the embeddings default
        (`gwlab.wire.models.DEFAULT_MODELS`); `extra` (encoding_format, dimensions, user) rides along, None
        ones omitted. An invalid request raises `InvalidRequest` naming the field and is never sent."""
        body = embeddings.build_request(input, default_model(model, EMBEDDINGS.ability), **extra)
        return await self._transport.request(EMBEDDINGS.method, EMBEDDINGS.path, family=EMBEDDINGS.name, json=body,
                                             parse=embeddings.parse_response)


class Embeddings:
    def __init__(self, twin: AsyncEmbeddings, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def create(self, input: str | Sequence[str], *, model: str | None = None,
               **extra: Any) -> EmbeddingsResult:
        return self._loop.run(self._twin.create(input, model=model, **extra))
