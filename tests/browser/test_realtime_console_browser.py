"""RealtimeConsole in a real JupyterLab with Chromium's fake microphone: espeak speech goes in through
getUserMedia and the capture worklet, the kernel's session answers, the page plays the speech."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import Lab, assert_no_secret, fake_microphone, image, run_first_cell

pytest.importorskip("playwright")
from playwright.sync_api import expect

pytest.importorskip("espeakng_loader")


OPEN_CONSOLE = """\
import gwlab
from gwlab.widgets import RealtimeConsole

gw = gwlab.connect()  # GWLAB_BASE_URL and GWLAB_API_KEY come from the server's environment
RealtimeConsole(gw, model="local/realtime-gemma-3-270m", max_output_tokens=16)
"""


def test_spoken_question_is_transcribed_answered_and_played(lab: Lab, launch: Any, gateway: Any,
                                                             tmp_path: Path) -> None:
    path = lab.notebook("realtime_console.ipynb", OPEN_CONSOLE)
    page = launch(*fake_microphone(tmp_path))
    run_first_cell(page, lab, path.name)
    console = page.locator(".gwlab-rt")
    console.wait_for(timeout=180_000)
    console.locator("[data-role=connect]").click()  # a click: the page may open the mic and play audio

    # locators, not element handles: the transcript and log are redrawn, so every poll queries afresh
    minutes = 180_000
    transcript = console.locator("[data-role=transcript]")
    expect(transcript.locator("[data-role=user]").first).to_contain_text(re.compile("capital", re.I), timeout=minutes)
    expect(transcript.locator("[data-role=assistant]").first).to_contain_text(re.compile(r"\w"), timeout=minutes)
    events = console.locator("[data-role=events]")
    expect(events.locator("details[data-type='playback.start']").first).to_be_attached(timeout=minutes)
    # played to the end, or stopped when the looping microphone spoke over it: either way reported back
    ended = "details[data-type='playback.drained'], details[data-type='playback.stopped']"
    expect(events.locator(ended).first).to_be_attached(timeout=minutes)
    expect(console.locator("[data-role=usage]")).to_contain_text("responses", timeout=minutes)
    user = transcript.locator("[data-role=user]").first

    assert "france" in user.text_content().lower()
    assert events.locator("details[data-dir=client][data-type='input_audio_buffer.append']").count() >= 1
    assert events.locator("details[data-dir=browser][data-type='microphone.on']").count() == 1
    assert events.locator("details[data-dir=server][data-type='response.audio.delta']").count() >= 1
    with contextlib.suppress(AssertionError):  # for the docs picture only: a turn the loop did not cut short
        expect(console.locator("[data-role=usage]")).not_to_contain_text(" 0 out ", timeout=60_000)
    console.screenshot(path=str(image("realtime_console.png")))
    assert_no_secret(page, gateway.api_key)
