"""Servers a test starts die with the test process, even when it is SIGKILLed (a CI time limit: no teardown).

A pytest-like parent starts a long-running child the way tests/support/servers.py starts llama-cpp-python's
server, laya-serve and LiteLLM's proxy (`start_owned`), prints the child's pid, and is killed; the child must
be gone (or a zombie awaiting its reaper), not an orphan still running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import wait_until

ROOT = Path(__file__).resolve().parent.parent
PARENT = """
import sys, time
from tests.support.processes import start_owned
child = start_owned([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_server_started_by_a_killed_test_process_dies_with_it() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _running(child) and os.getpgid(child) == child  # alive, in its own process group
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        wait_until(lambda: not _running(child), timeout=30, interval=0.05, what="the orphaned server gone")
    finally:
        parent.kill()
        parent.wait(timeout=30)
        if child and _running(child):
            os.kill(child, signal.SIGKILL)
