"""The test suite's own shape: folders are packages, helpers live in tests/support, bench imports no test module,
and the one bounded wait says what it waited for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import wait_until

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _imported(path: Path) -> set[str]:
    """The dotted names of the modules `path` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


def test_bench_imports_no_test_module() -> None:
    test_modules = {p.stem for p in TESTS.rglob("*.py")} | {"tests"}
    found = {f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "bench").rglob("*.py")
             for name in _imported(p) if name.split(".")[0] in test_modules}
    assert sorted(found) == []


def test_no_module_imports_a_test_module() -> None:
    """Shared code is in tests/support, never borrowed from a test file (which pytest collects)."""
    found = {f"{p.relative_to(ROOT)}: {name}" for p in TESTS.rglob("*.py")
             for name in _imported(p) if name.split(".")[-1].startswith("test_")}
    assert sorted(found) == []


def test_a_wait_returns_the_first_truthy_value_it_sees() -> None:
    calls = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(calls), timeout=30, interval=0.001) == "ready"


def test_a_wait_that_never_holds_fails_naming_what_it_waited_for_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the queue drained not met within 0.05 s \(last value 0\)"):
        wait_until(lambda: 0, timeout=0.05, interval=0.01, what="the queue drained")
