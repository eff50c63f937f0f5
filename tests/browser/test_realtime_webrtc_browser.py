"""RealtimeConsole's browser-direct WebRTC mode in a real JupyterLab: the kernel mints an ephemeral
token (the only credential the page sees), the page negotiates with the gateway itself, events come
back over the data channel and feed the same transcript and log.

The embedded gateway sends no CORS headers, so this test starts Chromium with web security off for
its cross-origin SDP POST; a hosted gateway that serves browsers allows the notebook's origin instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import Lab, assert_no_secret, fake_microphone, run_first_cell

pytest.importorskip("playwright")
from playwright.sync_api import expect

pytest.importorskip("aiortc")
pytest.importorskip("espeakng_loader")

OPEN_CONSOLE = """\
import gwlab
from gwlab.widgets import RealtimeConsole

gw = gwlab.connect()
RealtimeConsole(gw, model="local/realtime-gemma-3-270m", transport="webrtc", max_output_tokens=16)
"""


def test_direct_webrtc_session_hears_the_microphone_with_an_ephemeral_token(lab: Lab, launch: Any, gateway: Any,
                                                                             tmp_path: Path) -> None:
    path = lab.notebook("realtime_webrtc.ipynb", OPEN_CONSOLE)
    page = launch(*fake_microphone(tmp_path))
    tokens: list[str] = []
    page.on("request", lambda r: tokens.append(r.headers.get("authorization", "")) if "/realtime?" in r.url else None)
    run_first_cell(page, lab, path.name)
    console = page.locator(".gwlab-rt")
    console.wait_for(timeout=180_000)
    console.locator("[data-role=connect]").click()
    events = console.locator("[data-role=events]")
    expect(events.locator("details[data-type='webrtc.open']").first).to_be_attached(timeout=120_000)
    expect(console.locator("[data-role=status]")).not_to_have_text("error")
    transcript = console.locator("[data-role=transcript]")
    # the first utterance may be cut (the looping file was already playing when the track started)
    heard = transcript.locator("[data-role=user]", has_text=re.compile("capital", re.I))
    expect(heard.first).to_be_attached(timeout=180_000)
    expect(events.locator("details[data-dir=server][data-type='response.done']").first).to_be_attached(
        timeout=180_000)
    assert tokens and all(t.startswith("Bearer ek_") for t in tokens)  # ephemeral, never the key
    assert_no_secret(page, gateway.api_key)
