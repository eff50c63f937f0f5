"""`make test-core`: tests/core in the core-only venv, against a gateway this (full) venv serves.

    .venv/bin/python tests/core/run_core.py .venv-core/bin/python [pytest arguments]

The core venv has no model packages, so the embedded gateway runs here, as its own process; its URL
and a fresh key reach the core tests by environment (tests/core/conftest.py), never on a command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run as a file: the repository root, so `tests` is the package

from tests.core.conftest import KEY_ENV, URL_ENV  # noqa: E402
from tests.support.gateways import start_gateway, stop_gateway  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    core_python, *pytest_args = argv
    with tempfile.TemporaryDirectory() as tmp:
        running = start_gateway(Path(tmp) / "gateway.sqlite")
        try:
            env = {**os.environ, URL_ENV: running.base_url, KEY_ENV: running.api_key}
            command = [core_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), *pytest_args]
            return subprocess.run(command, env=env, cwd=HERE.parents[1], check=False).returncode
        finally:
            stop_gateway(running)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
