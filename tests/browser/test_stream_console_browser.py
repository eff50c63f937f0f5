"""StreamConsole in a real JupyterLab: type a prompt, click Send, watch the answer stream in."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support import wait_until as wait_for
from tests.support.lab import WIDGET_STATE, Lab, assert_no_secret, image, run_first_cell

pytest.importorskip("playwright")
from playwright.sync_api import expect

OPEN_CONSOLE = """\
import gwlab
from gwlab.widgets import StreamConsole

gw = gwlab.connect()  # GWLAB_BASE_URL and GWLAB_API_KEY come from the server's environment
StreamConsole(gw, model="local/gemma-3-270m", max_tokens=24, temperature=0)
"""


def test_typed_prompt_streams_an_answer_into_the_page(lab: Lab, launch: Any, gateway: Any) -> None:
    path = lab.notebook("stream_console.ipynb", OPEN_CONSOLE)
    page = launch()
    run_first_cell(page, lab, path.name)
    console = page.locator(".gwlab-sc")
    console.wait_for(timeout=180_000)
    # greedy: a sampled answer of a 270M base model is sometimes empty (it stops at once)
    console.locator("[data-role=prompt]").fill("What is the capital of France?")
    console.locator("[data-role=send]").click()
    status, answer = console.locator("[data-role=status]"), console.locator("[data-role=answer]")
    ended = re.compile(r"^(completed|stopped|interrupted|incomplete|failed|error)$")
    expect(status).to_have_text(ended, timeout=180_000)  # the stream ended, one way or another
    error = console.locator("[data-role=error]")
    assert status.text_content() == "completed", error.text_content() if error.count() else ""
    expect(answer).not_to_be_empty()
    assert console.locator("[data-role=usage]").text_content().startswith("usage: ")
    assert console.locator("[data-role=incomplete]").count() == 0
    console.screenshot(path=str(image("stream_console.png")))
    assert_no_secret(page, gateway.api_key)

    page.keyboard.press("Control+s")  # widget state is saved into the notebook (saveState): still no key
    wait_for(lambda: WIDGET_STATE in path.read_text(), timeout=60)
    saved = path.read_text()
    assert gateway.api_key not in saved
    assert "".join(json.loads(saved)["cells"][0]["source"]) == OPEN_CONSOLE
