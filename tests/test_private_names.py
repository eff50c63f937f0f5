"""No private reach-ins: a module reads only the private names it defines, and imports no other library's
private module (issue 23: `httpx._utils` at import time, `transport._key`, `gateway._owned`)."""

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


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_reads_no_private_name_another_module_defines(path: Path) -> None:
    assert _reach_ins(path) == []
