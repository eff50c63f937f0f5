"""Labeller in a real JupyterLab: a click and a number key each store a label (read back from the SQLite
file by this process) and move the estimate; Backspace goes back; JupyterLab's own keys stay out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.support.lab import Lab, assert_no_secret, image, run_first_cell

pytest.importorskip("playwright")
from playwright.sync_api import expect

OPEN_LABELLER = """\
import gwlab
from gwlab.widgets import Labeller
from tests.support.messages import QUESTIONS, support_messages

gw = gwlab.connect()  # GWLAB_BASE_URL and GWLAB_API_KEY come from the server's environment
refund = {{"refund": QUESTIONS["refund"]}}
messages = support_messages(40)
answers = messages.gw.decide("{{text}}", refund, gateway=gw, progress=False, checkpoint=None)
frame = messages[["text"]].join(answers.filter(like="refund__"))
plan = gwlab.label_plan(frame, "refund", budget=12, seed=0)
Labeller(gwlab.LabelSession(frame, plan, refund, prob="refund", store={store!r}))
"""


def _labels(store: Path) -> dict:
    import gwlab

    with gwlab.LabelStore(store) as opened:
        return opened.labels("refund").to_dict()


def test_click_and_keys_store_labels_and_move_the_estimate(lab: Lab, launch: Any, gateway: Any,
                                                            tmp_path: Path) -> None:
    store = tmp_path / "labels.sqlite"
    path = lab.notebook("labeller.ipynb", OPEN_LABELLER.format(store=str(store)))
    page = launch()
    run_first_cell(page, lab, path.name)
    widget = page.locator(".gwlab-lb")
    widget.wait_for(timeout=180_000)
    progress, estimate = widget.locator("[data-role=progress]"), widget.locator("[data-role=estimate]").first
    expect(progress).to_contain_text("0 of", timeout=30_000)
    first = re.search(r"row (\S+)", progress.text_content()).group(1)
    before = estimate.text_content()
    assert "0 labels" in before

    widget.locator("[data-role=option][data-key=true]").click()
    expect(progress).to_contain_text("1 of", timeout=30_000)
    assert _labels(store) == {int(first): "true"}  # on disk before the next row showed
    expect(estimate).not_to_have_text(before)
    second = re.search(r"row (\S+)", progress.text_content()).group(1)
    assert second != first

    page.keyboard.press("2")  # the panel kept the focus after the click: option 2 is "false"
    expect(progress).to_contain_text("2 of", timeout=30_000)
    assert _labels(store) == {int(first): "true", int(second): "false"}
    expect(estimate).to_contain_text("2 labels")
    assert page.locator(".jp-Notebook .jp-Cell").first.get_attribute("class").count("jp-CodeCell")  # no heading

    page.keyboard.press("Backspace")
    expect(progress).to_contain_text(f"row {second} ", timeout=30_000)
    expect(widget.locator("[data-role=option].given")).to_have_attribute("data-key", "false")
    wait_until(lambda: len(_labels(store)) == 2, timeout=10)
    widget.screenshot(path=str(image("labeller.png")))
    assert_no_secret(page, gateway.api_key)
