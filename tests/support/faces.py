"""Helpers of the family tests: one test body drives the sync `Gateway` or the `AsyncGateway`.

`face.run(x)` returns `x` for the sync face and runs the coroutine `x` on the test's own loop for the
async face, so `face.run(face.gw.decide(...))` exercises either implementation the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gwlab import AsyncGateway, Gateway
from tests.support.gateways import RequestLog

FACES = ["sync", "async"]


@dataclass
class Face:
    gw: Gateway | AsyncGateway
    run: Callable[[Any], Any]
    kind: str


@contextmanager
def open_face(kind: str, base_url: str, api_key: str, **options: Any) -> Iterator[Face]:
    if kind == "sync":
        with Gateway(base_url, api_key, **options) as gw:
            yield Face(gw, lambda value: value, kind)
        return
    loop = asyncio.new_event_loop()

    async def build() -> AsyncGateway:
        return AsyncGateway(base_url, api_key, **options)  # made on the loop that will use it

    agw = loop.run_until_complete(build())
    try:
        yield Face(agw, loop.run_until_complete, kind)
    finally:
        loop.run_until_complete(agw.aclose())
        loop.close()


def logged(db: Path, path: str) -> int:
    """How many requests for `path` the gateway's own request log holds."""
    return len(RequestLog(db).rows(path=path))
