"""The documentation site builds with mkdocs in strict mode: a broken link, a missing page or a docstring
the API reference cannot parse fails here, not on the day the site is published."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(600)
def test_site_builds_strict_with_no_warning(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"),
                           "--config-file", str(ROOT / "mkdocs.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    assert "WARNING" not in log, log[-5000:]
    assert (tmp_path / "site" / "reference" / "frames" / "index.html").exists()


def test_readme_links_binder_to_the_first_notebook() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "https://mybinder.org/badge_logo.svg" in readme
    assert "mybinder.org/v2/gh/OWNER/gwlab/HEAD?urlpath=lab/tree/notebooks/01-quickstart.ipynb" in readme
