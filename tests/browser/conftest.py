"""Browser fixtures: JupyterLab on loopback, driven by Playwright over Debian's chromium.

The gateway's URL and key reach the kernel only as environment variables of the Jupyter server
process (GWLAB_BASE_URL, GWLAB_API_KEY); notebooks never hold them. Chromium is Debian's
(`make browser-deps`), never Playwright's own download, started with a fresh user-data dir and the
flags NOTES.md gives for this closed network.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import free_port, wait_until
from tests.support.lab import CHROMIUM_FLAGS, LAB_SETTINGS, ROOT, Lab
from tests.support.processes import start_owned


@pytest.fixture(scope="session")
def browser_stack() -> None:
    """Skip (not fail) where the browser extra or Debian's chromium is missing, before any gateway starts."""
    for module in ("playwright", "nbformat", "anywidget"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[browser,notebook]')")
    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (make browser-deps)")
    if shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("jupyterlab is not installed (pip install -e '.[browser]')")


@pytest.fixture(scope="session")
def lab(browser_stack: None, gateway: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root, home = base / "notebooks", base / "home"
    root.mkdir()
    settings = home / "lab-settings"
    for name, text in LAB_SETTINGS.items():
        target = settings / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "GWLAB_BASE_URL": gateway.base_url, "GWLAB_API_KEY": gateway.api_key,
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTER_DATA_DIR": str(home / "data"), "IPYTHONDIR": str(home / "ipython"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_PLATFORM_DIRS": "1", "PYTHONPATH": str(ROOT)}
    command = [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", "--ServerApp.ip=127.0.0.1",
               *(["--allow-root"] if os.geteuid() == 0 else []), "--LabApp.extension_manager=readonly",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
    log = (base / "lab.log").open("wb")
    process = start_owned(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited before it was up; see {base / 'lab.log'}")
        try:
            return httpx.get(f"{url}/api/status", params={"token": token}, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=120, interval=0.5, what=f"JupyterLab up (see {base / 'lab.log'})")
    except BaseException:
        process.kill()
        raise
    yield Lab(url, token, root, process)
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture(autouse=True)
def _kernels_stopped(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each browser test, its notebook's kernel is shut down (memory on a small machine)."""
    yield
    if "lab" in request.fixturenames:
        request.getfixturevalue("lab").shutdown_kernels()


@pytest.fixture
def launch(browser_stack: None, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """`launch(*extra_flags)`: a fresh Chromium context (its own user-data dir) and a page in it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        contexts: list[Any] = []

        def start(*extra: str) -> Any:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path / f"profile{len(contexts)}"), executable_path=shutil.which("chromium"),
                headless=True, args=[*CHROMIUM_FLAGS, *extra], viewport={"width": 1280, "height": 1000})
            contexts.append(context)
            return context.pages[0] if context.pages else context.new_page()

        yield start
        for context in contexts:
            context.close()
