"""The sync facade inside a running event loop (as in Jupyter), and quiet closing."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings

import httpx
import pytest

import gwlab
from gwlab.client.loop import LoopThread
from tests.support.fakes import BASE_URL, CANARY_KEY, chat_body


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=chat_body("from the loop thread"))


def make(handler=ok) -> gwlab.Gateway:
    return gwlab.Gateway(BASE_URL, CANARY_KEY, http_transport=httpx.MockTransport(handler))


def test_sync_facade_works_inside_a_running_event_loop():
    async def notebook_cell() -> str:
        asyncio.get_running_loop()  # a cell's code runs inside the kernel's loop
        gw = make()
        try:
            return gw.chat("hi", model="m").text  # a plain sync call, no await
        finally:
            gw.close()

    assert asyncio.run(notebook_cell()) == "from the loop thread"


def test_run_label_travels_from_the_calling_thread_to_the_ledger():
    gw = make()
    try:
        with gwlab.label_calls("batch-7"):
            gw.chat("hi", model="m")
        gw.chat("hi", model="m")
        assert [row.run for row in gw.ledger.entries()] == ["batch-7", None]
    finally:
        gw.close()


async def test_run_label_reaches_concurrent_async_calls(make_gateway):
    gw = make_gateway(ok)
    with gwlab.label_calls("fan-out"):
        await asyncio.gather(*(gw.chat("hi", model="m") for _ in range(3)))
    assert {row.run for row in gw.ledger.entries()} == {"fan-out"}


def test_closing_twice_and_recreating_clients_is_quiet(capfd):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # a cell re-run rebinds the name: the old client is collected
            gw = make()
            gw.chat("hi", model="m")
        gw.close()
        gw.close()
        del gw
        gc.collect()
        with make() as scoped:
            scoped.models.list  # noqa: B018
    captured = capfd.readouterr()
    text = captured.err + captured.out + "".join(str(w.message) for w in caught)
    assert "Event loop is closed" not in text
    assert "never awaited" not in text and "Unclosed" not in text


def test_closed_gateway_refuses_calls_clearly():
    gw = make()
    gw.close()
    with pytest.raises(RuntimeError, match="closed"):
        gw.chat("hi", model="m")


def test_loop_threads_do_not_accumulate():
    before = threading.active_count()
    for _ in range(5):
        make().close()
    assert threading.active_count() <= before


def test_calling_the_sync_facade_from_its_own_loop_fails_instead_of_deadlocking():
    loop = LoopThread()

    async def inner() -> None:
        async def nothing() -> None:
            return None

        loop.run(nothing())

    try:
        with pytest.raises(RuntimeError, match="own loop thread"):
            loop.run(inner())
    finally:
        loop.close()
