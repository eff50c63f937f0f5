"""docs/evaluation.md states only figures its script prints: a fresh run must find each of its lines on the page."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "scripts" / "evaluation_table.py"


def _script():
    spec = importlib.util.spec_from_file_location("evaluation_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(600)
def test_every_line_the_evaluation_script_prints_is_on_the_page(gateway) -> None:
    from gwlab import Gateway

    page = (ROOT / "docs" / "evaluation.md").read_text()
    assert "docs/scripts/evaluation_table.py" in page  # the command stands beside the figures
    with Gateway(gateway.base_url, gateway.api_key) as gw, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        printed = _script().report(gw)
    missing = [line for line in printed.splitlines() if line.strip() and line not in page]
    assert not missing, "docs/evaluation.md disagrees with a fresh run; paste these lines:\n" + "\n".join(missing)
