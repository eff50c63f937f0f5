"""The harness itself: a server that fails to start says why, without its key; each server starts and answers."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from tests.support import servers
from tests.support.servers import RunningServer


def test_a_server_that_exits_early_reports_its_output_with_the_key_scrubbed(tmp_path: Path) -> None:
    key = servers.new_key()
    script = "import os, sys; print('boom: bad config for', os.environ['K']); sys.exit(3)"
    with pytest.raises(RuntimeError) as caught:
        servers.start("a broken server", [sys.executable, "-c", script], {"K": key}, servers.free_port(), key,
                        ["m"], tmp_path / "broken.log", ready_seconds=30)
    message = str(caught.value)
    assert "exited with code 3" in message and "boom: bad config for <key>" in message
    assert key not in message


def test_a_server_that_never_answers_fails_within_its_deadline(tmp_path: Path) -> None:
    key = servers.new_key()
    script = "import time; print('listening nowhere', flush=True); time.sleep(600)"
    with pytest.raises(RuntimeError, match="not ready within 1 s") as caught:
        servers.start("a silent server", [sys.executable, "-c", script], {}, servers.free_port(), key, ["m"],
                        tmp_path / "silent.log", ready_seconds=1)
    assert "listening nowhere" in str(caught.value)


@pytest.mark.parametrize("fixture", ["llama_server", "laya_server", "litellm_proxy"])
def test_each_server_starts_on_loopback_and_lists_its_models(fixture: str, request: pytest.FixtureRequest) -> None:
    server: RunningServer = request.getfixturevalue(fixture)
    assert server.api_key not in repr(server)
    good = httpx.get(f"{server.base_url}/models", headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30)
    assert server.base_url.startswith("http://127.0.0.1:")
    assert good.status_code == 200


def test_no_server_key_is_in_an_argv_a_config_file_or_a_server_log(llama_server: RunningServer,
                                                                    laya_server: RunningServer,
                                                                    litellm_proxy: RunningServer,
                                                                    byo_dir: Path) -> None:
    """Keys go to the servers through their environment only: `ps` shows argv, and files outlive the run."""
    running = (llama_server, laya_server, litellm_proxy)
    texts = [path.read_text(errors="replace") for path in byo_dir.iterdir() if path.is_file()]
    texts += [Path(f"/proc/{s.process.pid}/cmdline").read_bytes().decode(errors="replace") for s in running]
    assert any("litellm" in text for text in texts)  # the config and the logs were read
    assert not [s.name for s in running for text in texts if s.api_key in text]
