"""Waiting on a process a test started: its progress, bounded, and never past its death."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
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
