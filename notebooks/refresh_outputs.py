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
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
CHECK = "# NBVAL_CHECK_OUTPUT"


def kernel_manager() -> Any:
    """A kernel on this interpreter, whatever kernelspecs the machine has (as nbval's --nbval-current-env)."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> Any:
            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                          **ipykernel.kernelspec.get_kernel_dict())

    return KernelManager(kernel_name="python3", kernel_spec_manager=ThisPython())


def execute(path: Path, *, timeout: int = 600) -> nbformat.NotebookNode:
    """The notebook executed in its own folder, outputs included (nothing written)."""
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, km=kernel_manager(), timeout=timeout, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def strip(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Outputs and execution counts kept only in checked cells; no widget state, no timing metadata."""
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        if CHECK not in cell.source:  # nbval wants the execution count of a cell whose output it checks
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
