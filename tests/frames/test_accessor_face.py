"""`df.gw`'s face: each sync method is its async twin run to completion, so no logic lives in one twin,
and the two take the same parameters (issue 32: accessor.py keeps the face and the docs only)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from gwlab.frames import accessor
from gwlab.frames.accessor import GatewayAccessor

SOURCE = ast.parse(Path(accessor.__file__).read_text())
FACES = sorted(name for name, value in vars(GatewayAccessor).items()
               if inspect.isfunction(value) and not name.startswith("_") and not inspect.iscoroutinefunction(value))


def _method(name: str) -> ast.FunctionDef:
    cls = next(n for n in SOURCE.body if isinstance(n, ast.ClassDef) and n.name == "GatewayAccessor")
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_every_operation_has_a_face_and_a_twin() -> None:
    assert {"decide", "chat", "respond", "messages", "extract", "videos", "images", "tasks", "filter", "merge",
            "topk", "aggregate"} <= set(FACES)


@pytest.mark.parametrize("name", FACES)
def test_a_face_takes_exactly_its_async_twins_parameters(name: str) -> None:
    face, twin = inspect.signature(getattr(GatewayAccessor, name)), inspect.signature(getattr(GatewayAccessor,
                                                                                              f"a{name}"))
    assert [(p.name, p.kind, p.default, p.annotation) for p in face.parameters.values()] == \
           [(p.name, p.kind, p.default, p.annotation) for p in twin.parameters.values()]


def _face_problem(node: ast.FunctionDef, params: list[str]) -> str | None:
    """What is wrong with a face's body, or None: it must be one `return _sync(self.a<name>(...), options...)`
    passing every parameter on."""
    body = node.body[1:] if ast.get_docstring(node) else node.body
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return "more than one statement"
    call = body[0].value
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "_sync" and len(call.args) == 2
            and ast.unparse(call.args[1]) == "options"):
        return "not _sync(..., options)"
    inner = call.args[0]
    if not (isinstance(inner, ast.Call) and ast.unparse(inner.func) == f"self.a{node.name}"):
        return "not its own async twin"
    passed = [ast.unparse(a) for a in inner.args] + [k.arg or ast.unparse(k.value) for k in inner.keywords]
    return None if sorted(passed) == sorted(params) else f"passes {sorted(passed)}, takes {sorted(params)}"


@pytest.mark.parametrize("name", FACES)
def test_a_face_only_runs_its_async_twin(name: str) -> None:
    """Whatever the method does is written once, in the twin; the face runs it."""
    params = [p for p in inspect.signature(getattr(GatewayAccessor, name)).parameters if p != "self"]
    assert _face_problem(_method(name), params) is None


def test_the_face_check_refuses_logic_in_a_face_and_a_dropped_parameter() -> None:
    head = "def merge(self, right, *, how, **options):\n"
    good = head + "    return _sync(self.amerge(right, how=how, **options), options)\n"
    logic = head + "    spec = 1\n    return _sync(self.amerge(right, how=how, **options), options)\n"
    dropped = head + "    return _sync(self.amerge(right, **options), options)\n"
    other = head + "    return _sync(self.atopk(right, how=how, **options), options)\n"
    problems = [_face_problem(ast.parse(src).body[0], ["right", "how", "options"])
                for src in (good, logic, dropped, other)]
    assert problems[0] is None and all(problems[1:]), problems
