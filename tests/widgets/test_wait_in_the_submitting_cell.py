"""`submit()` then `wait()` in one notebook cell: wait returns with the final traits, not the first ones.

A kernel runs a cell inside its event loop, so the loop cannot apply the consoles' updates while the
cell blocks in `wait()`. `as_a_cell` reproduces that: the widget is built and waited on inside a running
loop that is busy with the cell. The work runs on the gateway's loop thread; `wait()` applies its updates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

pytest.importorskip("anywidget")

from gwlab import Gateway
from gwlab.widgets import DecisionExplorer, StreamConsole
from gwlab.wire.models import DEFAULT_MODELS
from tests.support.streams import HoldingTransport

T = TypeVar("T")


def as_a_cell(cell: Callable[[], T]) -> T:
    """Run `cell` as the kernel runs one: synchronously, inside the (thus blocked) running event loop."""
    async def kernel() -> T:
        return cell()

    return asyncio.run(kernel())


def test_submit_then_wait_in_one_cell_returns_the_whole_answer_and_its_end(gw: Gateway) -> None:
    def cell() -> None:  # read in the cell itself: once it returns, the kernel's loop runs the updates anyway
        console = StreamConsole(gw, max_tokens=16, temperature=0)  # the default text model: one rule
        console.submit("Reply with one short friendly sentence.")
        assert console.wait(180)
        assert console.model == DEFAULT_MODELS["text"]
        assert console.status in ("completed", "capped"), (console.status, console.error)
        assert console.text.strip() and console.usage["output_tokens"] > 0
        assert console.request_id == gw.ledger.entries()[-1].request_id

    as_a_cell(cell)


def test_run_then_wait_in_one_cell_shows_the_answers(gw: Gateway) -> None:
    def cell() -> None:
        explorer = DecisionExplorer(gw, state="The site is down for every customer.")
        explorer.run()
        assert explorer.wait(180)
        assert explorer.status == "done", explorer.error
        assert {answer["id"] for answer in explorer.answers} == {"urgent", "topic"}

    as_a_cell(cell)


def test_a_wait_that_times_out_says_the_stream_is_still_running(gateway: Any) -> None:
    with Gateway(gateway.base_url, gateway.api_key, http_transport=HoldingTransport(hold=60)) as held:
        def cell() -> None:
            console = StreamConsole(held, max_tokens=4)
            console.submit("Say hello.")
            with pytest.raises(TimeoutError, match=r"stream is still running after 0\.5 s"):
                console.wait(0.5)
            console.stop()
            assert console.wait(30)
            assert console.status == "stopped"

        as_a_cell(cell)
