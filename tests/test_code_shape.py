"""Shape rules of the package that a reviewer would otherwise check by hand (issue 23's done-when)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gwlab"
MAX_PARAMETERS = 10  # more is an options object waiting to be named


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(PACKAGE)), ast.parse(path.read_text())) for path in sorted(PACKAGE.rglob("*.py"))]


def test_no_function_takes_more_than_ten_parameters() -> None:
    too_many = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) + bool(args.vararg)
                         + bool(args.kwarg))
                if count > MAX_PARAMETERS:
                    too_many.append(f"{name}:{node.lineno} {node.name} ({count})")
    assert not too_many, too_many


def test_default_models_is_bound_once() -> None:
    bound = [name for name, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Assign | ast.AnnAssign)
             and any(isinstance(t, ast.Name) and t.id == "DEFAULT_MODELS"
                     for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    assert bound == ["wire/models.py"]
