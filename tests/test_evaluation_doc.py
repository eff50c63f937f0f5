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


def test_notebook_03s_recalibration_figure_names_its_method_and_the_rows_of_each_ece() -> None:
    import nbformat

    notebook = nbformat.read(ROOT / "notebooks" / "03-evaluation-and-calibration.ipynb", as_version=4)
    tags = {tag: cell.source for cell in notebook.cells for tag in cell.metadata.get("tags", [])}
    figure = tags["plot:recalibrated_temperature"]  # gwlab.demo writes recalibrated_temperature.png
    assert "plot:recalibrated" not in tags
    assert 'fig.suptitle(f"Temperature scaling' in figure
    assert 'label="held-out, before"' in figure and 'label="held-out, after temperature"' in figure
    assert ".set_title(" not in figure + tags["plot:reliability"]  # plots.reliability's titles give the rows
