"""The analyst's path (README -> docs/index.md -> docs/pandas.md -> docs/evaluation.md) runs top to bottom.

Every ```python block of the four pages is executed, in order, as a new user would: a fresh Python
process with no hosted gateway configured (`gwlab.connect()` starts the embedded local gateway, with the
real local models), one namespace per page (a reader may land on any page, so each page defines what
it uses), and every top-level expression shown as a notebook shows it (its repr, and its HTML repr when
it has one), so a repr that crashes fails too. A block that cannot run offline as written is skipped
only by a marker in the page on the line before it: `<!-- not run: reason -->`.

The pages run in a scratch directory that stands for the checkout's root (its `notebooks/` linked in,
for the labelled set), so files a page writes (a checkpoint) never land in the working tree. Run alone:
`python tests/test_analyst_path.py REPORT.json` (from a checkout's root) prints what ran.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/index.md", "docs/pandas.md", "docs/evaluation.md")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^\s*```python\s*$")  # also indented, in a list item


@dataclass(frozen=True)
class Block:
    """One ```python block: where it starts, its code, and why it is not run (None: it runs)."""

    page: str
    line: int
    code: str
    not_run: str | None


def python_blocks(page: str, text: str) -> list[Block]:
    """The page's ```python blocks in order; a block is skipped only by the marker on the line before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        start = i + 1
        end = next(j for j in range(start, len(lines)) if lines[j].strip().startswith("```"))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        code = textwrap.dedent("\n".join(lines[start:end]))
        blocks.append(Block(page, start + 1, code, marker["reason"] if marker else None))
        i = end + 1
    return blocks


def show(value: Any) -> None:
    """What a notebook does with an expression's value: its repr, and its HTML repr when it has one."""
    repr(value)
    html = getattr(value, "_repr_html_", None)
    if callable(html) and not isinstance(value, type):
        html()


def run_block(block: Block, namespace: dict[str, Any]) -> None:
    """Run the block statement by statement; each top-level expression is shown."""
    tree = ast.parse(block.code, filename=f"{block.page}:{block.line}")
    for node in tree.body:
        name = f"{block.page}:{block.line + node.lineno - 1}"
        if isinstance(node, ast.Expr):
            show(eval(compile(ast.Expression(node.value), name, "eval"), namespace))
        else:
            exec(compile(ast.Module([node], type_ignores=[]), name, "exec"), namespace)


def run_page(page: str) -> dict[str, Any]:
    """Run one page's blocks in one namespace, stopping at the first error (later blocks build on it)."""
    report: dict[str, Any] = {"page": page, "ran": 0, "not_run": [], "error": None, "warnings": []}
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for block in python_blocks(page, (ROOT / page).read_text()):
            if block.not_run is not None:
                report["not_run"].append(f"line {block.line}: {block.not_run}")
                continue
            try:
                run_block(block, namespace)
            except BaseException:  # RunInterrupted is a KeyboardInterrupt: a failure too
                report["error"] = f"block at {page}:{block.line}\n{traceback.format_exc()}"
                break
            report["ran"] += 1
    report["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    return report


def main(out: Path) -> None:
    """Run every page (the child process of the test) and write the reports as JSON to `out`."""
    reports = [run_page(page) for page in PAGES]
    import matplotlib  # after the pages, so the backend is the one they drew with

    out.write_text(json.dumps({"pages": reports, "backend": matplotlib.get_backend()}))
    for report in reports:
        print(f"{report['page']}: {report['ran']} ran, {len(report['not_run'])} not run,",
              "error" if report["error"] else "no error")


def path_environment(home: Path) -> dict[str, str]:
    """A new user's environment: no hosted gateway, a fresh gateway database and checkpoint, Agg plots."""
    env = {k: v for k, v in os.environ.items() if k not in ("GWLAB_BASE_URL", "GWLAB_API_KEY", "GWLAB_GGUF")}
    env.update(GWLAB_DB=str(home / "gateway.sqlite"), GWLAB_CHECKPOINT=str(home / "frames.sqlite"),
               MPLBACKEND="Agg", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return env


def test_python_blocks_are_found_in_order_and_skipped_only_by_the_marker_before_them() -> None:
    text = ("```python\na = 1\n```\n\n<!-- not run: needs a hosted key -->\n```python\nb = 2\n```\n"
            "<!-- not run: stale -->\n\nprose\n```python\nc = 3\n```\n```bash\nls\n```\n"
            "- a list item:\n\n  ```python\n  d = 4\n  ```\n")
    assert python_blocks("p.md", text) == [Block("p.md", 2, "a = 1", None),
                                           Block("p.md", 7, "b = 2", "needs a hosted key"),
                                           Block("p.md", 13, "c = 3", None), Block("p.md", 21, "d = 4", None)]


@pytest.mark.timeout(600)
def test_the_analysts_path_runs_top_to_bottom_on_the_embedded_gateway(tmp_path: Path) -> None:
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")  # the labelled set, read as from the checkout
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(out)], cwd=tmp_path,
                          env=path_environment(tmp_path), capture_output=True, text=True, timeout=540)
    assert done.returncode == 0 and out.exists(), done.stderr[-5000:]
    result = json.loads(out.read_text())
    for page in result["pages"]:
        print(f"{page['page']}: {page['ran']} blocks ran, {len(page['not_run'])} not run {page['not_run']}",
              *page["warnings"], sep="\n  warned: ")
    errors = [page["error"] for page in result["pages"] if page["error"]]
    assert not errors, "\n\n".join(errors)
    assert [page["page"] for page in result["pages"] if page["ran"] == 0] == []
    assert result["backend"].lower() == "agg"  # the pages' plots drew off screen, as in a headless run
    # every page's connect() reached the one embedded gateway, started once: no hosted gateway was used
    assert done.stdout.count("gwlab: started the embedded local gateway at http://127.0.0.1:") == 1, done.stdout


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("analyst_path.json"))
