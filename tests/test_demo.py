"""`make demo` (gwlab/demo.py): clean output, the headline figures printed, a titled report of both notebooks.

Running the two real notebooks takes minutes, so the headless runner is proven on a one-cell notebook
(a real kernel, started and stopped as the demo does) and the report on a notebook shaped like an
executed one; `make demo` itself runs the real ones.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("nbconvert")

import nbformat

from gwlab import demo

RESULTS: dict[str, dict[str, Any]] = {
    "02-decisions-at-scale": {"rows": 312, "questions": 4, "requests": 317, "input_tokens": 1000},
    "03-evaluation-and-calibration": {"rows": 312, "accuracy": {"urgent": 0.728, "team": 0.747},
                                      "ece_before": {"urgent": 0.239, "team": 0.323},
                                      "ece_after_temperature": {"urgent": 0.234, "team": 0.068},
                                      "ece_after_isotonic": {"urgent": 0.031, "team": 0.058},
                                      "accuracy_interval": {"urgent": [0.676, 0.775], "team": [0.696, 0.793]},
                                      "interval_level": 0.95,
                                      "text_model_vs_decisions": {
                                          "rows": 20, "text_model": 0.2, "decisions": 0.75, "diff": 0.55,
                                          "diff_interval": [0.3, 0.8], "p_value": 0.00195,
                                          "verdict": "team: B is more accurate (...)"},
                                      "input_tokens": 2000, "output_tokens": 150},
}


def executed_like(name: str) -> Any:
    """A notebook as nbclient returns it: a headline cell whose output is displayed JSON."""
    cell = nbformat.v4.new_code_cell("display(JSON(headline))", metadata={"tags": ["headline"]})
    cell.outputs = [nbformat.v4.new_output("display_data", data={"application/json": RESULTS[name],
                                                                  "text/plain": "<IPython.core.display.JSON object>"})]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}"), cell])


def test_the_headless_kernel_logs_no_transport_or_orphan_warning(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from IPython.display import JSON, display\ndisplay(JSON({'rows': 3}))", metadata={"tags": ["headline"]})])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(notebook, path)
    script = ("import sys; from pathlib import Path; from gwlab import demo\n"
              "print(demo.headline(demo.execute(Path(sys.argv[1]), timeout=120)))")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'rows': 3}"
    assert "without encryption" not in done.stderr and "Parent appears to have exited" not in done.stderr
    assert "WARNING" not in done.stderr, done.stderr


def test_the_headline_rows_hold_rows_accuracy_ece_before_and_after_tokens_and_elapsed() -> None:
    rows = dict(demo.headline_rows(RESULTS, 12.5))
    assert rows["rows (support messages)"] == "312"
    assert rows["urgent: accuracy [95% interval]"] == "0.728 [0.676, 0.775]"
    assert rows["urgent: ECE before -> temperature / isotonic (held-out half)"] == "0.239 -> 0.234 / 0.031"
    assert rows["tokens"] == "3000 in, 150 out" and rows["elapsed"] == "12.5 s"
    assert demo.summary(RESULTS, 12.5).splitlines()[-1] == "tokens: 3000 in, 150 out; elapsed 12.5 s"


def test_the_report_covers_both_notebooks_with_a_title_and_the_headline_as_a_table() -> None:
    executed = {name: executed_like(name) for name in demo.DEMO_NOTEBOOKS}
    page = demo.html_report(demo.report_notebook(executed, RESULTS, 12.5))
    assert f"<title>{demo.REPORT_TITLE}</title>" in page
    assert all(f"notebooks/{name}.ipynb" in page for name in demo.DEMO_NOTEBOOKS)
    assert "&lt;IPython.core.display.JSON object&gt;" not in page and "<IPython.core.display.JSON" not in page
    assert '<th style="text-align:left">team: ECE before -&gt; temperature / isotonic (held-out half)</th>' \
           '<td style="text-align:right">0.323 -&gt; 0.068 / 0.058</td>' in page
    assert '<th style="text-align:left">accuracy.urgent</th><td style="text-align:right">0.728</td>' in page
    assert '<td style="text-align:right">3000 in, 150 out</td>' in page


def test_the_readme_names_two_commands_and_what_report_html_holds() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make demo", "make test"]
    assert "under a minute" not in section
    assert "`report.html` (both notebooks on one titled page that opens with the headline" in readme.replace("\n", " ")


def test_the_headline_shows_the_text_model_against_decisions_as_a_paired_comparison_not_a_kappa() -> None:
    row = dict(demo.headline_rows(RESULTS))["text model vs decisions, team accuracy on 20 rows"]
    assert row == "0.200 vs 0.750, difference +0.550 [+0.300, +0.800], McNemar p 0.00195"
    text = demo.summary(RESULTS, 12.5)
    assert "kappa" not in text
    assert any(line.split()[:2] == ["urgent", "0.728"] and line.endswith("[0.676, 0.775]   0.239 -> 0.234 / 0.031")
               for line in text.splitlines())
    assert "text model (A) vs decisions (B), team on 20 rows: 0.200 vs 0.750" in text
    assert "verdict: team: B is more accurate" in text
