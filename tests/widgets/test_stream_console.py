"""StreamConsole on the real gateway: front-end messages in, streamed traits out, stops and cuts marked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("anywidget")

from gwlab import Gateway
from gwlab.widgets import StreamConsole
from gwlab.widgets._bridge import Throttle
from tests.support import wait_until
from tests.support.models import PROMPT, TEXT_MODEL
from tests.support.streams import CuttingTransport, HoldingTransport


def front_end(widget: Any, **content: Any) -> None:
    """What the browser does: a custom message to the widget's handler."""
    widget._handle_custom_msg(content, [])


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_send_from_the_front_end_streams_text_until_complete(gw: Gateway, protocol: str) -> None:
    console = StreamConsole(gw, model=TEXT_MODEL, protocol=protocol, max_tokens=8)
    front_end(console, type="send", prompt=PROMPT)
    assert console.status == "streaming" and console.prompt == PROMPT
    assert console.wait(180)
    # a sampled answer may stop by itself or at the 8-token cap: either is a proper end
    assert console.status in ("completed", "capped"), console.error
    assert console.complete == (console.status == "completed")
    assert console.usage["input_tokens"] > 0 and console.usage["output_tokens"] > 0
    assert console.request_id


def test_stop_keeps_the_partial_text_marked_incomplete_and_recorded(gateway: Any) -> None:
    # the answer's end is held back, so the stop lands mid-stream however short the answer: a sampled
    # "long story" from the 270M base model is 3 tokens long in 3 of 40 tries, and could end before the stop
    with Gateway(gateway.base_url, gateway.api_key, http_transport=HoldingTransport(hold=60)) as held:
        console = StreamConsole(held, model=TEXT_MODEL, max_tokens=400, temperature=0)
        console.submit(PROMPT)
        wait_until(lambda: console.text.strip(), timeout=180)  # some visible text has arrived (not a lone newline)
        front_end(console, type="stop")
        assert console.wait(30)
        assert console.status == "stopped" and not console.complete
        assert console.text.strip()
        row = held.ledger.entries()[-1]
    assert row.path == "/chat/completions" and row.complete is False


def test_a_cut_connection_is_marked_interrupted(gateway: Any) -> None:
    with Gateway(gateway.base_url, gateway.api_key, http_transport=CuttingTransport(chunks=2),
                 max_retries=0) as cut:
        console = StreamConsole(cut, model=TEXT_MODEL, max_tokens=32)
        console.submit(PROMPT)
        assert console.wait(180)
    assert console.status == "interrupted" and not console.complete


def test_an_empty_prompt_is_refused_in_the_widget_without_a_request(gw: Gateway) -> None:
    console = StreamConsole(gw, model=TEXT_MODEL)
    before = len(gw.ledger.entries())
    front_end(console, type="send", prompt="   ")
    assert console.error.startswith("prompt:") and console.status == "idle"
    assert len(gw.ledger.entries()) == before


def test_an_unknown_model_is_shown_as_an_error(gw: Gateway) -> None:
    console = StreamConsole(gw, model="local/no-such-model", max_tokens=4)
    console.submit(PROMPT)
    assert console.wait(60)
    assert console.status == "error" and not console.complete and "404" in console.error


def test_a_second_send_keeps_the_first_turn_in_the_history(gw: Gateway) -> None:
    console = StreamConsole(gw, model=TEXT_MODEL, max_tokens=4, history=True)
    console.submit(PROMPT)
    assert console.wait(180)
    first = console.text
    console.submit("Q: And of Italy?\nA:")
    assert console.wait(180)
    assert [t["text"] for t in console.turns] == [first] and console.turns[0]["status"] in ("completed", "capped")
    assert console.status in ("completed", "capped")


def test_tool_calls_are_shown(gw: Gateway) -> None:
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    console = StreamConsole(gw, model=TEXT_MODEL, max_tokens=32, tools=[weather], tool_choice="required")
    console.submit("What is the weather in Paris?")
    assert console.wait(180)
    assert console.status == "completed", console.error
    assert console.tool_calls and console.tool_calls[0]["name"] == "get_weather"


# --- throttling ------------------------------------------------------------------------------------
async def test_throttle_flushes_at_most_once_per_interval_and_never_loses_the_last_change() -> None:
    now = [0.0]
    flushed: list[float] = []
    throttle = Throttle(lambda: flushed.append(now[0]), 0.05, clock=lambda: now[0])
    for _ in range(100):  # 100 changes within 10 ms of fake time
        throttle.poke()
        now[0] += 0.0001
    assert len(flushed) == 1  # the first at once, the rest wait for the timer
    await asyncio.sleep(0.1)  # the timer (real loop time) fires the pending flush
    assert len(flushed) == 2
    throttle.poke()
    throttle.flush_now()
    assert len(flushed) == 3
