"""The models family: `GET /models`, the model IDs visible to the key."""

from __future__ import annotations

from gwlab.client.loop import LoopThread
from gwlab.client.transport.core import AsyncTransport
from gwlab.wire import models
from gwlab.wire.families import FAMILIES
from gwlab.wire.models import ModelList

__all__ = ["AsyncModels", "Models"]
MODELS = FAMILIES["models"]


class AsyncModels:
    """`await gw.models()` lists IDs; `await gw.models.list()` keeps each entry's fields."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def __call__(self) -> list[str]:
        return (await self.list()).ids

    async def list(self) -> ModelList:
        return await self._transport.request(MODELS.method, MODELS.path, family=MODELS.name, parse=models.parse_models)


class Models:
    def __init__(self, twin: AsyncModels, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def __call__(self) -> list[str]:
        return self._loop.run(self._twin())

    def list(self) -> ModelList:
        return self._loop.run(self._twin.list())
