"""Binder's environment (`binder/`): pinned, CPU-only, complete, and able to run the notebooks.

The fast tests read the files. The slow one (`make binder-check`, opt-in through GWLAB_BINDER_CHECK=1)
builds a fresh venv from `binder/requirements.txt` as Binder would (pip's wheel cache spares the
llama-cpp-python compile), runs `postBuild`, checks JupyterLab's widget extensions, runs notebooks 01,
02, 03 and 06 through `start`, each in a fresh kernel, and reports each kernel's peak memory (its
embedded gateway included) and that of a JupyterLab server listing the notebooks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;]+)(?P<options>(\s+--[\w-]+=\S+)*)\s*(#.*)?$")
NO_DEPS = "python -m pip install --no-deps --no-cache-dir "
EXTRAS_ON_BINDER = ("local", "speech", "notebook")
NEVER_ON_BINDER = {"torch", "tensorflow", "jax", "jaxlib", "dask", "aiortc"}


def pins() -> dict[str, str]:
    """Project name (canonical) -> pinned version, from binder/requirements.txt; any other line fails."""
    found: dict[str, str] = {}
    for number, line in enumerate((BINDER / "requirements.txt").read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"requirements.txt line {number} is not an exact pin: {line!r}"
        found[canonicalize_name(match["name"])] = match["version"]
    return found


def test_every_requirement_is_pinned_exactly() -> None:
    assert len(pins()) > 50  # the whole tree, not only the direct dependencies


def test_no_gpu_stack_and_no_optional_heavyweights() -> None:
    pinned = set(pins())
    assert not pinned & NEVER_ON_BINDER
    assert not [name for name in pinned if name.startswith("nvidia-")]


def test_pins_satisfy_the_package_and_its_binder_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"]]
    for extra in EXTRAS_ON_BINDER:
        wanted += project["optional-dependencies"][extra]
    pinned = pins() | post_build_pins()
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} (pyproject) is not pinned for Binder"
        assert requirement.specifier.contains(pinned[name], prereleases=True), \
            f"{name}=={pinned[name]} does not satisfy pyproject's {requirement}"


def test_runtime_is_the_python_the_package_supports() -> None:
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert Requirement(f"python{requires}").specifier.contains("3.11")


def test_post_build_installs_gwlab_and_exact_pins_without_their_dependencies() -> None:
    script = BINDER / "postBuild"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)  # syntax only
    targets = [command.removeprefix(NO_DEPS) for command in _post_build_commands()]
    assert all(command.startswith(NO_DEPS) for command in _post_build_commands())
    assert targets[0] == "-e ." and all(PIN.match(target) for target in targets[1:])


def _post_build_commands() -> list[str]:
    lines = (BINDER / "postBuild").read_text().splitlines()
    return [line.strip() for line in lines[1:] if line.strip() and not line.lstrip().startswith(("#", "set "))]


def post_build_pins() -> dict[str, str]:
    """Wheels postBuild installs alone (`--no-deps`): gwlab reads their files and never imports their deps."""
    matches = [PIN.match(command.removeprefix(NO_DEPS)) for command in _post_build_commands()]
    return {canonicalize_name(m["name"]): m["version"] for m in matches if m}


def test_start_sets_the_environment_then_becomes_the_command() -> None:
    script = BINDER / "start"
    assert os.access(script, os.X_OK)
    shell = subprocess.Popen([str(script), "sh", "-c", 'echo "$$ $HF_HUB_OFFLINE $GWLAB_LLAMA_THREADS"'],
                             stdout=subprocess.PIPE, text=True)
    out, _ = shell.communicate(timeout=30)
    pid, offline, threads = out.split()
    assert int(pid) == shell.pid  # exec: the server replaces the script, so it receives the signals
    assert (offline, threads) == ("1", "2")


def test_start_holds_no_secret() -> None:
    text = (BINDER / "start").read_text()
    assert "GWLAB_API_KEY" not in text and "GWLAB_BASE_URL" not in text


# --- the slow check: a fresh environment, as Binder builds it ------------------------------------------

RUNNER = """
import json, os, sys, threading, time
from pathlib import Path
from gwlab.demo import execute

peak = {}
def watch():  # the kernel is our child: keep the last VmHWM (its peak RSS) read before it exits
    while True:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                status = Path(entry.path, "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("PPid", "").strip() == str(os.getpid()) and "VmHWM" in fields:
                peak[entry.name] = int(fields["VmHWM"].split()[0])
        time.sleep(0.2)
threading.Thread(target=watch, daemon=True).start()
started = time.perf_counter()
notebook = execute(Path("notebooks") / (sys.argv[1] + ".ipynb"))
errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
print(json.dumps({"seconds": round(time.perf_counter() - started, 1), "errors": len(errors),
                  "kernel_peak_rss_mb": round(max(peak.values(), default=0) / 1024)}))
"""


def _run(command: list[str], env: dict[str, str], timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of a command that must succeed."""
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command[:3]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout, done.stderr


def _lab_rss_mb(venv: Path, env: dict[str, str]) -> float:
    """Resident memory of an idle JupyterLab server started from the venv, once it lists the notebooks."""
    port = free_port()
    root = ["--allow-root"] if os.geteuid() == 0 else []  # Binder runs it as a plain user; CI may be root
    log = venv.parent / "jupyterlab.log"
    with log.open("wb") as sink:
        lab = subprocess.Popen([str(BINDER / "start"), str(venv / "bin" / "jupyter"), "lab", "--no-browser",
                                f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", *root,
                                f"--ServerApp.root_dir={ROOT / 'notebooks'}"],
                               cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        def served() -> dict | None:
            if lab.poll() is not None:
                raise AssertionError(f"JupyterLab exited:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5) as reply:
                    return json.load(reply)
            except OSError:
                return None

        try:
            listing = wait_until(served, timeout=120, interval=1, what="JupyterLab serving its contents")
        except AssertionError as exc:
            raise AssertionError(f"JupyterLab did not serve:\n{log.read_text()[-3000:]}") from exc
        assert "01-quickstart.ipynb" in {item["name"] for item in listing["content"]}
        status = Path(f"/proc/{lab.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) / 1024
    finally:
        lab.terminate()
        lab.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.environ.get("GWLAB_BINDER_CHECK") != "1", reason="slow: run `make binder-check`")
def test_fresh_binder_environment_runs_the_notebooks() -> None:
    # not pytest's tmp_path: concurrent pytest sessions of the same user prune each other's old base dirs
    with tempfile.TemporaryDirectory(prefix="gwlab-binder-") as scratch:
        _check_fresh_environment(Path(scratch) / "binder-venv")


def _check_fresh_environment(venv: Path) -> None:
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    env = {key: value for key, value in os.environ.items()
           if key not in ("GWLAB_BASE_URL", "GWLAB_API_KEY", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # postBuild's `python` is the new venv's
    report: dict[str, object] = {}

    began = time.perf_counter()
    _run([str(venv / "bin" / "pip"), "install", "-q", "-r", str(BINDER / "requirements.txt")], env, 3000)
    report["install_seconds"] = round(time.perf_counter() - began, 1)
    _run([str(BINDER / "postBuild")], env, 600)
    assert shutil.which("python", path=env["PATH"]) == str(venv / "bin" / "python")

    extensions = "".join(_run([str(venv / "bin" / "jupyter"), "labextension", "list"], env, 120))
    assert "anywidget" in extensions and "@jupyter-widgets/jupyterlab-manager" in extensions

    python = str(venv / "bin" / "python")
    for name in ("01-quickstart", "02-decisions-at-scale", "03-evaluation-and-calibration", "06-realtime-audio"):
        out, _ = _run([str(BINDER / "start"), python, "-c", RUNNER, name], env, 1800)
        result = json.loads(out.splitlines()[-1])
        assert result["errors"] == 0, (name, result)
        report[name] = result
        print(f"binder-check: {name}: {result}", flush=True)
    report["jupyterlab_rss_mb"] = round(_lab_rss_mb(venv, env))
    print("\nbinder-check:", json.dumps(report, indent=1))
    out_dir = Path(os.environ.get("GWLAB_OUT", ROOT / "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "binder-check.json").write_text(json.dumps(report, indent=1) + "\n")
