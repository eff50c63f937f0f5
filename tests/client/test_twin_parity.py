"""Every public async method has a sync twin with the same parameters, so the two faces cannot drift.

Families are found on a live `Gateway` (every attribute wrapping an async twin), so a family added
later is checked without editing this file.
"""

from __future__ import annotations

import inspect

import httpx
import pytest

from gwlab import AsyncGateway, Gateway
from gwlab.client.streams import AsyncEventStream, EventStream
from tests.support.fakes import BASE_URL, CANARY_KEY

RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__", "__aiter__": "__iter__"}
DUNDERS = {"__call__", "__aenter__", "__aexit__", "__aiter__", "__enter__", "__exit__", "__iter__"}


def methods(cls: type) -> dict[str, inspect.Signature]:
    out = {}
    for name, value in inspect.getmembers(cls):
        if name.startswith("_") and name not in DUNDERS:
            continue
        if isinstance(inspect.getattr_static(cls, name), property):
            continue
        if inspect.isfunction(value):
            out[RENAMED.get(name, name)] = inspect.signature(value)
    return out


def params(signature: inspect.Signature) -> list[tuple[str, object, object, object]]:
    return [(p.name, p.kind, p.default, p.annotation)
            for p in signature.parameters.values() if p.name != "self"]


def twin_pairs() -> list[tuple[type, type]]:
    gateway = Gateway(BASE_URL, CANARY_KEY, http_transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    try:
        families = [(type(value._twin), type(value)) for name, value in vars(gateway).items()
                    if not name.startswith("_") and hasattr(value, "_twin")]
    finally:
        gateway.close()
    return [(AsyncGateway, Gateway), (AsyncEventStream, EventStream), *families]


PAIRS = twin_pairs()


def test_the_core_families_are_found():
    names = {sync.__name__ for _, sync in PAIRS}
    assert {"Gateway", "EventStream", "Models", "Chat", "Responses", "Messages"} <= names


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=[s.__name__ for _, s in PAIRS])
def test_every_public_async_method_has_a_sync_twin_with_the_same_parameters(async_cls: type, sync_cls: type):
    async_methods, sync_methods = methods(async_cls), methods(sync_cls)
    assert set(async_methods) == set(sync_methods)
    for name, signature in async_methods.items():
        assert params(signature) == params(sync_methods[name]), f"{sync_cls.__name__}.{name}"


def test_the_gateways_take_the_same_options():
    assert params(inspect.signature(AsyncGateway.__init__)) == params(inspect.signature(Gateway.__init__))


def test_no_sync_twin_method_is_a_coroutine():
    for _, sync_cls in PAIRS:
        for name, value in inspect.getmembers(sync_cls, inspect.isfunction):
            if not name.startswith("_") or name == "__call__":
                assert not inspect.iscoroutinefunction(value), f"{sync_cls.__name__}.{name}"
