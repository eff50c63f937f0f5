"""Browser test helpers: the running Lab, notebooks for it, Chromium flags, and page checks."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "img"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--autoplay-policy=no-user-gesture-required"]


def image(name: str) -> Path:
    """Where a screenshot goes: docs/img under GWLAB_SCREENSHOTS=1 (`make screenshots`), else a temp
    folder, so that running the tests never rewrites the documentation's images."""
    folder = IMAGES if os.environ.get("GWLAB_SCREENSHOTS") == "1" else Path(tempfile.gettempdir()) / "gwlab-shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


# JupyterLab settings for a quiet, reproducible page: no news toast, widget state saved with the notebook
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        '{"fetchNews": "false", "checkForUpdates": false}',
    "@jupyter-widgets/jupyterlab-manager/plugin.jupyterlab-settings": '{"saveState": true}',
}


QUESTION = "What is the capital of France?"
MIC_RATE = 48_000  # Chromium's fake capture reads a 48 kHz (or 16 kHz) mono pcm16 WAV, looped
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@dataclass
class Lab:
    """A running JupyterLab: where its notebooks live and how to open one."""

    url: str
    token: str = field(repr=False)  # Jupyter's own token, not a gateway credential
    root: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def notebook(self, name: str, *sources: str) -> Path:
        """Write a notebook of code cells (a python3 kernel) into the Lab's root."""
        import nbformat

        book = nbformat.v4.new_notebook()
        book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                       "language": "python"}
        book.cells = [nbformat.v4.new_code_cell(source) for source in sources]
        path = self.root / name
        nbformat.write(book, path)
        return path

    def shutdown_kernels(self) -> None:
        """Stop every kernel (each test's notebook started one; a realtime one may still be connected)."""
        import httpx

        params = {"token": self.token}
        for kernel in httpx.get(f"{self.url}/api/kernels", params=params, timeout=10).json():
            httpx.delete(f"{self.url}/api/kernels/{kernel['id']}", params=params, timeout=30)

    def address(self, name: str) -> str:
        """The notebook alone in a fresh workspace (`reset`): no tab left open by an earlier test."""
        return f"{self.url}/lab/workspaces/{Path(name).stem}/tree/{name}?reset&token={self.token}"


def run_first_cell(page: Any, lab: Lab, name: str, screenshot: Path | None = None) -> None:
    """Open a notebook in JupyterLab and run its first cell (Lab queues it until the kernel is up).

    The key press is repeated until the cell's prompt shows it queued or ran: a press that lands
    while Lab is still laying out the page is lost."""
    page.goto(lab.address(name))
    cell = page.locator(".jp-Notebook .jp-Cell").first
    editor, prompt = cell.locator(".cm-content"), cell.locator(".jp-InputPrompt")
    editor.wait_for(timeout=120_000)
    deadline = time.monotonic() + 120
    while True:
        dialog = page.locator(".jp-Dialog button.jp-mod-accept")
        if dialog.count():  # a kernel picker or similar: take the default
            dialog.first.click()
        editor.click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function("el => /\\[(\\*|\\d+)\\]/.test(el.textContent)", arg=prompt.element_handle(),
                                   timeout=10_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                if screenshot is not None:
                    page.screenshot(path=str(screenshot))
                raise


def assert_no_secret(page: Any, *secrets_: str) -> None:
    """Neither the rendered text nor the DOM of the page holds any of `secrets_`."""
    html, text = page.content(), page.evaluate("document.body.innerText")
    for secret in secrets_:
        assert secret not in html and secret not in text


def microphone_wav(path: Path) -> Path:
    """The question spoken by espeak-ng, with silence around it (the file loops)."""
    from gwlab.local.engines import get_speaker
    from gwlab.wire.realtime import audio

    pcm, rate = get_speaker().speak(QUESTION)
    second = b"\x00" * (MIC_RATE * 2)  # of pcm16 silence
    speech = audio.resample_pcm16(pcm, rate, MIC_RATE)
    audio.write_wav(path, second[:MIC_RATE] + speech + second * 20, MIC_RATE)  # 0.5 s, the question, 20 s
    return path


def fake_microphone(folder: Path) -> list[str]:
    """Chromium flags for a microphone that speaks `microphone_wav`, granted without a prompt."""
    wav = microphone_wav(folder / "question.wav")
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}"]
