"""No private reach-ins: a module reads only the private names it defines, imports no other library's
private module (issue 23: `httpx._utils` at import time, `transport._key`, `gateway._owned`), and imports
no private name from another of gwlab's packages (issue 32: `from gwlab.wire.decisions import _kind`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gwlab"
CHECKED = sorted(PACKAGE.rglob("*.py"))  # every module of the package, the local gateway and engines included


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(tree: ast.Module) -> set[str]:
    """The private names this module defines: functions, classes, slots and attributes it assigns."""
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef |
                                                                   ast.ClassDef)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.ctx, ast.Store)}
    names |= {node.target.id for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
              and isinstance(node.target, ast.Name)}  # dataclass fields
    names |= {elt.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
              for elt in ast.walk(node.value) if isinstance(elt, ast.Constant) and isinstance(elt.value, str)}
    return {name for name in names if _private(name)}


def _reach_ins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    own, found = _defined_here(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")
        modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                   else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for module in modules:
            if not module.startswith("gwlab") and any(map(_private, module.split("."))):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: import {module}")
    return found


def _package(path: Path) -> str:
    """The gwlab package a module belongs to: `frames` for gwlab/frames/run/runner.py, `gwlab` for plots.py."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "gwlab"


def _module_path(dotted: str) -> Path | None:
    """The file of a gwlab module or package, if `dotted` names one."""
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def _private_imports(path: Path, text: str | None = None) -> list[str]:
    """`from gwlab.x import _name` (a private name or module) where gwlab.x is another package's; `text`
    stands for the module's source when given."""
    found = []
    for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
        if not (isinstance(node, ast.ImportFrom) and node.module and not node.level
                and node.module.split(".")[0] == "gwlab"):
            continue
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            target = _module_path(dotted) or _module_path(node.module)
            if target is not None and _package(target) != _package(path) and any(
                    map(_private, dotted.split("."))):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: from {node.module} import "
                             f"{alias.name}")
    return found


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_reads_no_private_name_another_module_defines(path: Path) -> None:
    assert _reach_ins(path) == []


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_imports_no_private_name_of_another_package(path: Path) -> None:
    assert _private_imports(path) == []


def test_the_private_import_check_sees_a_private_name_and_a_private_module() -> None:
    """The check itself: both forms of reach-in are found; a public name, or a package's own private
    module, is not."""
    text = ("from gwlab.wire.decisions import _kind, render_state\nfrom gwlab.frames import _client\n"
            "from gwlab.local import errors\nfrom gwlab.local.engines import _openmp\n")
    found = [line.split(": ", 1)[1] for line in _private_imports(PACKAGE / "local" / "probe.py", text)]
    assert found == ["from gwlab.wire.decisions import _kind", "from gwlab.frames import _client"]
