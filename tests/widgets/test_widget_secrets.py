"""No key in what reaches the browser: synced traits, messages to the front end, the ESM sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anywidget")

import gwlab.widgets
from gwlab import Gateway
from gwlab.widgets import DecisionExplorer, RealtimeConsole, StreamConsole, UsageDashboard
from tests.support import wait_until
from tests.support.models import PROMPT, REALTIME_MODEL, TEXT_MODEL
from tests.support.widget_state import SECRET_NAMES

WIDGETS_DIR = Path(gwlab.widgets.__file__).parent


def exercised(gw: Gateway) -> list[tuple[Any, list[Any]]]:
    """Each console after real work, with every message it sent to its front end."""
    made: list[tuple[Any, list[Any]]] = []
    for widget in (StreamConsole(gw, model=TEXT_MODEL, max_tokens=4), DecisionExplorer(gw, state="Site down"),
                   UsageDashboard(gw, start=False), RealtimeConsole(gw, model=REALTIME_MODEL, max_output_tokens=8),
                   RealtimeConsole(gw, model=REALTIME_MODEL, transport="webrtc")):
        sent: list[Any] = []
        widget.send = lambda content, buffers=None, sent=sent: sent.append((content, buffers))
        made.append((widget, sent))
    stream, explorer, dashboard, realtime, webrtc = (w for w, _ in made)
    stream.submit(PROMPT)
    assert stream.wait(180)
    explorer.run()
    assert explorer.wait(60)
    realtime.say("Hello")
    wait_until(lambda: realtime.usage.get("responses") == 1, timeout=180)
    realtime.disconnect()
    webrtc._handle_custom_msg({"type": "webrtc_token"}, [])
    wait_until(lambda: made[-1][1], timeout=60)
    dashboard.refresh()
    return made


def test_key_never_appears_in_widget_state_messages_or_front_end_code(gw: Gateway, gateway: Any) -> None:
    key = gateway.api_key
    for widget, sent in exercised(gw):
        state = widget.get_state()
        assert key not in json.dumps(state, default=repr), type(widget).__name__
        assert key not in json.dumps(sent, default=repr), type(widget).__name__
        synced = [name for name in widget.keys if not name.startswith("_")]
        assert not [name for name in synced if SECRET_NAMES.search(name)], synced  # no credential-shaped trait
        assert key not in widget._esm
    assert gw.ledger.entries()  # the work above really happened


def test_the_front_end_code_reads_no_credential() -> None:
    for path in WIDGETS_DIR.glob("*.js"):
        source = path.read_text()
        assert "GWLAB_API_KEY" not in source and "api_key" not in source, path.name
        # the only Authorization header any page code builds is the WebRTC offer's ephemeral token
        assert source.count("Authorization") == (1 if path.name == "realtime_console.js" else 0), path.name
