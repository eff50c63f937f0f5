"""Processes a test starts: they die with the test process, and waiting on one is bounded and never past its death."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from bench.harness.loopback import wait_until


def wait_while_running(process: subprocess.Popen[str], predicate: Callable[[], Any], timeout: float,
                       what: str) -> Any:
    """`wait_until(predicate)`, failing at once with the process's output if it ends first; a process that
    has not got there in `timeout` seconds is killed, so a failed test leaves none behind."""

    def reached() -> Any:
        if process.poll() is not None:
            pytest.fail(f"the process ended before {what}: {process.communicate()}")
        return predicate()

    try:
        return wait_until(reached, timeout=timeout, interval=0.02, what=what)
    except AssertionError:
        process.kill()
        raise AssertionError(f"{what} not reached within {timeout:g} s: {process.communicate()}") from None


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """`preexec_fn` of a test's server: the kernel SIGKILLs it when the process that started it dies.

    A suite killed by a time limit (SIGKILL: no fixture teardown runs) otherwise left the gateway,
    JupyterLab, llama-cpp-python's server, laya-serve and LiteLLM's proxy running as orphans (NOTES.md).
    Runs in the child between fork and exec, after `start_new_session` made it its own group; if the
    parent already died in between, the signal would never come, so the child exits at once.
    """
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(125)
    if os.getppid() != parent:
        os._exit(125)


def start_owned(argv: Sequence[str], **options: Any) -> subprocess.Popen[Any]:
    """`Popen(argv)` in its own process group (so a stop signals its workers too) that dies with this process."""
    return subprocess.Popen(list(argv), start_new_session=True, preexec_fn=die_with_parent, **options)
