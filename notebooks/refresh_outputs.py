"""Re-execute notebooks and keep only the outputs nbval checks, so the repository holds no volatile output.

    .venv/bin/python notebooks/refresh_outputs.py                 # every notebook
    .venv/bin/python notebooks/refresh_outputs.py 01-quickstart   # one

Cells marked `# NBVAL_CHECK_OUTPUT` keep their outputs (nbval compares them with a fresh run, after
`nbval_sanitize.cfg`); every other cell is saved empty, without execution count or run metadata.
Run it with GWLAB_BASE_URL and GWLAB_API_KEY unset: the stored outputs come from the embedded gateway.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat

from gwlab.demo import execute

HERE = Path(__file__).resolve().parent
CHECK = "# NBVAL_CHECK_OUTPUT"


def strip(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Outputs and execution counts kept only in checked cells; no widget state, no timing metadata."""
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code" and CHECK not in cell.source:  # nbval needs a checked cell's count
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("widgets", None)
    return notebook


def main(names: list[str]) -> int:
    if os.environ.get("GWLAB_BASE_URL") or os.environ.get("GWLAB_API_KEY"):
        print("unset GWLAB_BASE_URL and GWLAB_API_KEY first: stored outputs come from the embedded gateway")
        return 2
    paths = [HERE / f"{name.removesuffix('.ipynb')}.ipynb" for name in names] or sorted(HERE.glob("[0-9]*.ipynb"))
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        nbformat.write(strip(execute(path)), path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
