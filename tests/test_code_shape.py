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


# --- rooms (issue 32): small modules, folders a reader can take in, no import circles ---------------------

MAX_LINES = 600
MAX_MODULES = 20  # per folder, its __init__ not counted
MAX_FRAMES_ROOM = 15  # per room of gwlab/frames/


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the gwlab modules it imports (at import time, in a function, or for type checkers alike:
    each is a dependency a reader follows). `from a import b` counts as a.b when a.b is a module."""
    graph: dict[str, set[str]] = {}
    for name, text in sources.items():
        found = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in sources else node.module
                          for a in node.names}
        graph[name] = {target for target in found if target in sources and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_is_over_600_lines() -> None:
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_folder_holds_more_than_20_modules_and_no_frames_room_more_than_15() -> None:
    crowded = {}
    for folder in {path.parent for path in PACKAGE.rglob("*.py")}:
        count = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        room = folder.parent == PACKAGE / "frames"
        if count > (MAX_FRAMES_ROOM if room else MAX_MODULES):
            crowded[str(folder.relative_to(PACKAGE))] = count
    assert crowded == {}


def test_each_room_says_in_its_first_docstring_line_what_lives_there() -> None:
    rooms = [p for top in ("frames", "stats", "client", "wire") for p in (PACKAGE / top).rglob("__init__.py")]
    silent = [str(p.relative_to(PACKAGE)) for p in rooms if not (ast.get_docstring(ast.parse(p.read_text())) or "")
              .strip()]
    assert silent == []


def test_gwlab_has_no_import_circle() -> None:
    sources = {_module_name(path): path.read_text() for path in PACKAGE.rglob("*.py")}
    assert circles(import_graph(sources)) == []


def test_the_circle_check_finds_a_circle_through_a_lazy_import_and_passes_a_chain() -> None:
    """The check itself, on made-up modules: a -> b -> a (b's import inside a function) is one circle."""
    sources = {"gwlab.a": "from gwlab.b import f\n", "gwlab.b": "def f():\n    from gwlab import a\n",
               "gwlab.c": "import gwlab.a\n"}
    assert circles(import_graph(sources)) == [["gwlab.a", "gwlab.b"]]
    assert circles(import_graph({**sources, "gwlab.b": "X = 1\n"})) == []


def test_stats_imports_numpy_and_the_standard_library_only() -> None:
    """gwlab/stats/ is plain numpy (frames imports it as it imports wire): no pandas, nothing above it."""
    import sys

    allowed = {"numpy", "gwlab", "__future__", *sys.stdlib_module_names}
    found = []
    for path in (PACKAGE / "stats").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                top = name.split(".")[0]
                inside = name.startswith(("gwlab.stats", "gwlab.errors")) or name == "gwlab"
                if top not in allowed or (top == "gwlab" and not inside):
                    found.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert found == []


# --- a run's options are read once, at the door (issue 32 point 2) ----------------------------------------

# the modules that take `**options` from users and turn them into typed objects: pandas' face, the Dask
# face, and the declaration itself (`RunConfig.of` / `.split`); every other module gets a RunConfig or a spec
OPTION_DOORS = {"frames/accessor.py", "frames/dask/calls.py", "frames/run/config.py"}
OPTION_NAMES = {"options", "own", "opts", "kwargs", "run_options"}  # what an options dict is called
TYPED_OPTIONS = {"RunOptions", "TaskOptions", "ExtractOptions", "DaskOptions", "DaskExtractOptions"}


def options_reads(source: str) -> list[str]:
    """Where `source` reads an options dict: `options.get(...)`, `.pop(...)`, `options[...]`, or takes a
    parameter typed as the user's keyword options (`RunOptions`, ...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in OPTION_NAMES:
            found.append(f"{node.lineno}: {node.func.value.id}.{node.func.attr}(...)")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in OPTION_NAMES:
            found.append(f"{node.lineno}: {node.value.id}[...]")
        elif isinstance(node, ast.arg) and node.annotation is not None and \
                {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)} & TYPED_OPTIONS:
            found.append(f"{node.lineno}: parameter {node.arg} typed as the user's options")
    return found


def test_no_options_dict_is_read_below_the_doors() -> None:
    """The accessor (and the Dask face) build a RunConfig and specs at the door; nothing below pops its
    own defaults out of the user's keywords (cascade, oracle, operators, extract, steps, Dask used to)."""
    reads = {}
    for path in sorted((PACKAGE / "frames").rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if name not in OPTION_DOORS and (found := options_reads(path.read_text())):
            reads[name] = found
    assert reads == {}


def test_the_options_check_sees_a_pop_a_get_a_subscript_and_a_typed_parameter() -> None:
    """The check itself, on made-up code: each way of reading the user's options is found; a config is not."""
    source = ("def f(frame, options: RunOptions):\n    options.pop('levels')\n    options.get('prefix', '')\n"
              "    return options['gateway']\n\ndef g(frame, config):\n    return config.prefix\n")
    assert [line.split(": ", 1)[1] for line in options_reads(source)] == [
        "parameter options typed as the user's options", "options.pop(...)", "options.get(...)", "options[...]"]


def test_the_column_clash_check_is_written_once() -> None:
    """Every run refuses a clash through `frames/columns.refuse_clash` (it had 5 copies): its message is
    written in that module only."""
    writers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if "already has column" in path.read_text())
    assert writers == ["frames/columns.py"]
