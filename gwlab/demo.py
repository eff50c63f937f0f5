"""`make demo`: the evaluation notebooks, executed headless on the embedded local gateway.

It starts the embedded gateway once, executes `notebooks/02-decisions-at-scale.ipynb` and
`notebooks/03-evaluation-and-calibration.ipynb` in fresh kernels pointed at it (through
`GWLAB_BASE_URL` and `GWLAB_API_KEY` in the kernels' environment only: no key is written anywhere),
and writes to `out/` (or `$GWLAB_OUT`): the executed notebooks, `report.html` (both notebooks as one
page, titled, opening with the headline table), the figures of the cells tagged `plot:<name>` as
`<name>.png`, and `headline.json`. Then it prints the headline figures: rows, accuracy with its interval,
ECE before and after recalibration, the text model against the decision model as a paired comparison
(`gwlab.compare`: difference, interval, test, verdict), tokens and elapsed time. The notebooks compute
those figures themselves, in a cell tagged `headline` that displays them as JSON, so the numbers printed
here are the ones the notebooks show.

The kernels talk to this process over IPC sockets, not TCP: loopback TCP without CurveZMQ keys makes
each kernel log a warning about plain-text transport, and an IPC socket is a file only this user can
open. Each kernel is shut down before the next starts, so none outlives the demo (a kernel whose parent
has gone logs "Parent appears to have exited").
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
DEMO_NOTEBOOKS = ("02-decisions-at-scale", "03-evaluation-and-calibration")
REPORT_TITLE = "gwlab demo: decisions at scale (notebook 02), evaluation and calibration (notebook 03)"
CELL_TIMEOUT_SECONDS = 900


def kernel_manager() -> Any:
    """A kernel manager for this interpreter, whatever kernelspecs the machine has installed."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> Any:
            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                          **ipykernel.kernelspec.get_kernel_dict())

    # IPC sockets (files in a private temporary folder), named by absolute path: the kernel runs in the
    # notebook's folder, so a relative name would point client and kernel at different files
    sockets = Path(tempfile.mkdtemp(prefix="gwlab-demo-kernel-")) / "kernel"
    return KernelManager(kernel_name="python3", kernel_spec_manager=ThisPython(), transport="ipc", ip=str(sockets))


def execute(path: Path, *, env: Mapping[str, str] | None = None, timeout: int = CELL_TIMEOUT_SECONDS) -> Any:
    """Execute a notebook in its own folder and return it with its outputs (nothing is written).

    On a failing cell, nbclient's CellExecutionError is raised with the partly executed notebook
    attached as `.notebook`, so a caller can still save it.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    km = kernel_manager()
    client = NotebookClient(notebook, km=km, timeout=timeout, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute(env=dict(env if env is not None else os.environ))
    except CellExecutionError as exc:
        exc.notebook = notebook  # type: ignore[attr-defined]  # the executed notebook rides on nbclient's error
        raise
    finally:  # nbclient leaves a kernel manager it was given running: a kernel must not outlive us
        if km.has_kernel:
            km.shutdown_kernel(now=False)
        shutil.rmtree(Path(km.ip).parent, ignore_errors=True)  # the sockets' private folder
    return notebook


def headline(notebook: Any) -> dict[str, Any]:
    """The JSON displayed by the notebook's cell tagged `headline` ({} when there is none)."""
    for cell in notebook.cells:
        if "headline" in cell.get("metadata", {}).get("tags", []):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "application/json" in data:
                    return dict(data["application/json"])
    return {}


def figures(notebook: Any) -> dict[str, bytes]:
    """PNG figures of the cells tagged `plot:<name>`, by name (the last image of each cell)."""
    found: dict[str, bytes] = {}
    for cell in notebook.cells:
        names = [tag.removeprefix("plot:") for tag in cell.get("metadata", {}).get("tags", [])
                 if tag.startswith("plot:")]
        images = [output["data"]["image/png"] for output in cell.get("outputs", [])
                  if "image/png" in output.get("data", {})]
        if names and images:
            found[names[0]] = base64.b64decode(images[-1])
    return found


def headline_rows(results: Mapping[str, Mapping[str, Any]], elapsed: float | None = None) -> list[tuple[str, str]]:
    """The headline figures as (figure, value) rows, computed from the notebooks' headline JSON."""
    scale, evaluation = results.get(DEMO_NOTEBOOKS[0], {}), results.get(DEMO_NOTEBOOKS[1], {})
    rows: list[tuple[str, str]] = []
    if "rows" in evaluation or "rows" in scale:
        rows.append(("rows (support messages)", str(evaluation.get("rows", scale.get("rows")))))
    accuracy, before = evaluation.get("accuracy", {}), evaluation.get("ece_before", {})
    after_t, after_i = evaluation.get("ece_after_temperature", {}), evaluation.get("ece_after_isotonic", {})
    for question, value in accuracy.items():
        rows.append((f"{question}: accuracy{_level(evaluation)}", _with_interval(value, evaluation, question)))
        if question in before:
            rows.append((f"{question}: ECE before -> temperature / isotonic (held-out half)",
                         f"{before[question]:.3f} -> {_number(after_t.get(question))} / "
                         f"{_number(after_i.get(question))}"))
    paired = evaluation.get("text_model_vs_decisions")
    if paired:
        rows.append((f"text model vs decisions, team accuracy on {paired['rows']} rows", _paired(paired)))
    tokens_in = sum(int(r.get("input_tokens", 0)) for r in results.values())
    tokens_out = sum(int(r.get("output_tokens", 0)) for r in results.values())
    rows.append(("tokens", f"{tokens_in} in, {tokens_out} out"))
    if elapsed is not None:
        rows.append(("elapsed", f"{elapsed:.1f} s"))
    return rows


def _level(evaluation: Mapping[str, Any]) -> str:
    level = evaluation.get("interval_level")
    return f" [{level:.0%} interval]" if isinstance(level, int | float) and evaluation.get("accuracy_interval") else ""


def _with_interval(value: float, evaluation: Mapping[str, Any], question: str) -> str:
    """`0.728 [0.676, 0.775]`, or the value alone when the notebook gave no interval."""
    interval = evaluation.get("accuracy_interval", {}).get(question)
    return f"{value:.3f}" if not interval else f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _paired(paired: Mapping[str, Any]) -> str:
    """The paired comparison in one line: both accuracies, the difference with its interval, the test."""
    low, high = paired["diff_interval"]
    return (f"{paired['text_model']:.3f} vs {paired['decisions']:.3f}, difference {paired['diff']:+.3f} "
            f"[{low:+.3f}, {high:+.3f}], McNemar p {paired['p_value']:.3g}")


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "n/a"


def html_table(rows: list[tuple[str, str]] | Mapping[str, Any]) -> str:
    """An HTML table of (name, value) rows, or of a (nested) mapping flattened to dotted names."""
    import html

    pairs = list(_flatten(rows)) if isinstance(rows, Mapping) else rows
    body = "".join(f'<tr><th style="text-align:left">{html.escape(str(name))}</th>'
                   f'<td style="text-align:right">{html.escape(str(value))}</td></tr>' for name, value in pairs)
    return f'<table class="gwlab-headline">{body}</table>'


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Any:
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def with_headline_tables(notebook: Any) -> Any:
    """A copy whose headline JSON outputs also carry an HTML table: a page shows the figures, not
    `<IPython.core.display.JSON object>` (HTML exporters do not render application/json)."""
    import copy

    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if "headline" in cell.get("metadata", {}).get("tags", []):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if isinstance(data.get("application/json"), Mapping):
                    data["text/html"] = html_table(data["application/json"])
    return notebook


def report_notebook(executed: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]],
                    elapsed: float | None = None) -> Any:
    """One notebook holding every executed one, under a title and the headline table."""
    import nbformat

    intro = (f"# {REPORT_TITLE}\n\nExecuted headless by `make demo` (`python -m gwlab.demo`) on the embedded "
             "local gateway. The headline figures, from the cells tagged `headline`:\n\n"
             + html_table(headline_rows(results, elapsed)))
    cells = [nbformat.v4.new_markdown_cell(intro)]
    for name, notebook in executed.items():
        cells.append(nbformat.v4.new_markdown_cell(f"---\n\n*Notebook `notebooks/{name}.ipynb`, executed:*"))
        cells.extend(with_headline_tables(notebook).cells)
    first = next(iter(executed.values()), None)
    return nbformat.v4.new_notebook(cells=cells, metadata=dict(first.metadata) if first is not None else {})


def html_report(notebook: Any, title: str = REPORT_TITLE) -> str:
    """The notebook as one self-contained HTML page (images inline) titled `title`."""
    from nbconvert import HTMLExporter

    body, _resources = HTMLExporter(template_name="lab").from_notebook_node(
        notebook, resources={"metadata": {"name": title}})
    return body


def summary(results: Mapping[str, dict[str, Any]], elapsed: float) -> str:
    """The headline figures as a few lines of text."""
    scale, evaluation = results.get(DEMO_NOTEBOOKS[0], {}), results.get(DEMO_NOTEBOOKS[1], {})
    lines = [f"gwlab demo on the embedded local gateway: {evaluation.get('rows', scale.get('rows'))} hand-written "
             f"support messages x {scale.get('questions', 4)} questions"]
    accuracy = evaluation.get("accuracy", {})
    before = evaluation.get("ece_before", {})
    after_t = evaluation.get("ece_after_temperature", {})
    after_i = evaluation.get("ece_after_isotonic", {})
    if accuracy:
        lines.append(f"  {'question':10} {'accuracy' + _level(evaluation):>30}   "
                     "ECE before -> temperature / isotonic (held-out half)")
        for question, value in accuracy.items():
            lines.append(f"  {question:10} {_with_interval(value, evaluation, question):>30}   "
                         f"{before.get(question, float('nan')):.3f} -> "
                         f"{after_t.get(question, float('nan')):.3f} / {after_i.get(question, float('nan')):.3f}")
    for key, rule in (("urgent_threshold_cost_4to1", "cost 4:1"), ("urgent_threshold_best_f1", "best F1")):
        threshold = evaluation.get(key)
        if threshold:
            lines.append(f"  urgent at P >= {threshold['threshold']:.2f} ({rule}): recall {threshold['recall']:.2f}, "
                         f"precision {threshold['precision']:.2f}, escalating {threshold['escalated']:.0%}")
    paired = evaluation.get("text_model_vs_decisions")
    if paired:  # a paired comparison (gwlab.compare) on the same rows, A = text model, B = decisions
        lines.append(f"  text model (A) vs decisions (B), team on {paired['rows']} rows: {_paired(paired)}")
        lines.append(f"    verdict: {paired['verdict']}")
    if scale:
        lines.append(f"  02: {scale.get('requests')} decision requests, {scale.get('input_tokens')} input tokens; "
                     f"the re-run cost {scale.get('tokens_on_rerun')} tokens (checkpoint)")
    tokens_in = sum(int(r.get("input_tokens", 0)) for r in results.values())
    tokens_out = sum(int(r.get("output_tokens", 0)) for r in results.values())
    lines.append(f"tokens: {tokens_in} in, {tokens_out} out; elapsed {elapsed:.1f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from gwlab import local

    started = time.perf_counter()
    # uvicorn's notice about its websockets backend concerns the gateway's configuration, not this demo
    warnings.filterwarnings("ignore", message="The `websockets` implementation is deprecated")
    out = Path(os.environ.get("GWLAB_OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    names = argv if argv else list(DEMO_NOTEBOOKS)
    server = local.start()  # always the embedded gateway, even when a hosted one is configured
    print(f"gwlab demo: embedded gateway at {server.base_url}; executing {', '.join(names)}", flush=True)
    env = {**os.environ, "GWLAB_BASE_URL": server.base_url, "GWLAB_API_KEY": server.api_key}
    results: dict[str, dict[str, Any]] = {}
    executed: dict[str, Any] = {}
    try:
        for name in names:
            began = time.perf_counter()
            try:
                notebook = execute(NOTEBOOKS / f"{name}.ipynb", env=env)
            except CellExecutionError as exc:
                partial = getattr(exc, "notebook", None)
                if partial is not None:
                    nbformat.write(partial, out / f"{name}.ipynb")
                print(f"gwlab demo: {name} failed; the partly executed notebook is {out / name}.ipynb\n{exc}",
                      file=sys.stderr)
                return 1
            nbformat.write(notebook, out / f"{name}.ipynb")
            for figure, png in figures(notebook).items():
                (out / f"{figure}.png").write_bytes(png)
            executed[name], results[name] = notebook, headline(notebook)
            print(f"  {name}: {time.perf_counter() - began:.1f} s", flush=True)
    finally:
        server.stop()
    (out / "headline.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started
    (out / "report.html").write_text(html_report(report_notebook(executed, results, elapsed)), encoding="utf-8")
    print()
    print(summary(results, elapsed))
    print(f"results in {out}/: executed notebooks, report.html, figures, headline.json")
    missing = [name for name, figures_ in results.items() if not figures_]
    for name in missing:  # a demo that cannot show its figures must not look like one that did
        print(f"gwlab demo: {name} displayed no headline figures (no cell tagged 'headline' showed JSON)",
              file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
