"""A reply cut by the token cap is shown as capped in the magic, the stream console and the usage dashboard
(issue 18 item 8).

`%%gw chat --max-tokens 30` used to print `complete` for a reply cut mid-sentence. Here the real
gateway answers greedily (the magic has no temperature option, so the client's transport adds
`temperature: 0` to each body it sends to the real gateway over loopback) with a 3-token cap on a
prompt that asks for a long story: the cap ends every answer, every run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("IPython")
pytest.importorskip("anywidget")

from gwlab import Gateway, magics
from gwlab.widgets import StreamConsole, UsageDashboard
from tests.support.models import TEXT_MODEL

LONG = "Q: Tell me a long story about a dragon who lived in a castle.\nA: Once upon a time"
REASON = {"chat": "length", "responses": "max_output_tokens", "messages": "max_tokens"}


class GreedyTransport(httpx.AsyncBaseTransport):
    """The real transport, with `temperature: 0` in every JSON body (the magic cannot ask for it)."""

    def __init__(self) -> None:
        self._real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("content-type") == "application/json":
            body = json.loads(await request.aread())
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
            request = httpx.Request(request.method, request.url, headers=headers,
                                    content=json.dumps({**body, "temperature": 0}).encode())
        return await self._real.handle_async_request(request)

    async def aclose(self) -> None:
        await self._real.aclose()


@pytest.fixture(scope="module")
def greedy(gateway: Any) -> Iterator[Gateway]:
    client = Gateway(gateway.base_url, gateway.api_key, http_transport=GreedyTransport())
    yield client
    client.close()


@pytest.fixture(scope="module")
def shell(greedy: Gateway) -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gwlab")
    ip.user_ns["greedy_gw"] = greedy
    ip.run_line_magic("gw", "connect greedy_gw")
    yield ip
    magics._Session.gateway = None  # the fixture's gateway is closed by its own fixture


@pytest.mark.parametrize("protocol", list(REASON))
def test_the_chat_magic_marks_a_capped_reply_capped(shell: Any, greedy: Gateway, capsys: Any,
                                                    protocol: str) -> None:
    shell.run_cell_magic("gw", f"chat --protocol {protocol} --max-tokens 3 -o answer", LONG)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    answer = shell.user_ns["answer"]
    assert (answer.ending, answer.complete) == ("capped", False)
    assert f" · CAPPED ({REASON[protocol]}) · " in last and "complete" not in last
    row = greedy.ledger.entries()[-1]
    assert (row.ending, row.complete) == ("capped", False)


@pytest.mark.parametrize("protocol", list(REASON))
def test_the_stream_console_marks_a_capped_reply_capped(gw: Gateway, protocol: str) -> None:
    console = StreamConsole(gw, model=TEXT_MODEL, protocol=protocol, max_tokens=3, temperature=0)
    console.submit(LONG)
    assert console.wait(180)
    assert (console.status, console.complete) == ("capped", False), console.error
    assert console.text
    row = gw.ledger.entries()[-1]
    assert (row.ending, row.complete) == ("capped", False)


def test_the_usage_dashboard_shows_each_call_s_ending(gateway: Any) -> None:
    with Gateway(gateway.base_url, gateway.api_key) as fresh:
        fresh.chat(LONG, model=TEXT_MODEL, max_completion_tokens=3, temperature=0)
        fresh.models()
        dashboard = UsageDashboard(fresh, start=False)
        dashboard._handle_custom_msg({"type": "refresh"}, [])
    assert [row["ending"] for row in dashboard.rows] == ["complete", "capped"]  # newest first
    assert dashboard.summary["incomplete"] == 1 and dashboard.summary["errors"] == 0
