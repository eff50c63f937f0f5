"""Client fixtures: gateways over `httpx.MockTransport`, used only to inject faults, and each face of the
client on the session's real embedded gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from gwlab import AsyncGateway, Gateway
from gwlab.wire import limits
from tests.support.faces import FACES, Face, open_face
from tests.support.fakes import BASE_URL, CANARY_KEY, Handler, chat_body


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff of a millisecond, so retry tests take no time."""
    monkeypatch.setattr(limits, "BACKOFF_BASE_SECONDS", 0.001)


@pytest.fixture
async def make_gateway() -> AsyncIterator[Callable[..., AsyncGateway]]:
    """`make_gateway(handler, **options)`: an AsyncGateway whose every request goes to `handler`."""
    made: list[AsyncGateway] = []

    def make(handler: Handler, **options: Any) -> AsyncGateway:
        options.setdefault("api_key", CANARY_KEY)
        gateway = AsyncGateway(options.pop("base_url", BASE_URL), http_transport=httpx.MockTransport(handler),
                               **options)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        await gateway.aclose()


@pytest.fixture
def make_sync_gateway() -> Iterator[Callable[..., Gateway]]:
    made: list[Gateway] = []

    def make(handler: Handler, **options: Any) -> Gateway:
        options.setdefault("api_key", CANARY_KEY)
        gateway = Gateway(options.pop("base_url", BASE_URL), http_transport=httpx.MockTransport(handler),
                          **options)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.close()


@pytest.fixture
def chat_ok() -> Callable[..., httpx.Response]:
    def respond(text: str = "Hello", status: int = 200, **headers: str) -> httpx.Response:
        return httpx.Response(status, json=chat_body(text), headers={"x-request-id": "req_ok", **headers})

    return respond


@pytest.fixture(params=FACES)
def face(request: pytest.FixtureRequest, gateway: Any) -> Iterator[Face]:
    """The session's embedded gateway through each face of the client (sync, async), opened and closed."""
    with open_face(request.param, gateway.base_url, gateway.api_key) as opened:
        yield opened
