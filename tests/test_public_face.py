"""`import gwlab` offers a curated set of names, each documented and each reporting `gwlab` as its home."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gwlab

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "gwlab.md"


def test_exported_names_are_exactly_the_documented_ones() -> None:
    documented = set(re.findall(r"^::: gwlab\.(\w+)", REFERENCE.read_text(), flags=re.M))
    assert documented == set(gwlab.__all__)


def test_every_exported_name_resolves_and_reports_gwlab_as_its_module() -> None:
    for name in gwlab.__all__:
        obj = getattr(gwlab, name)
        if name != "errors":
            assert obj.__module__ == "gwlab", name


def test_internal_helpers_and_unused_aliases_are_not_exported() -> None:
    for name in ("error_for_status", "field_of", "ConnectionInterrupted", "run"):
        assert not hasattr(gwlab, name), name
    assert not hasattr(gwlab.errors, "ConnectionInterrupted")


def test_the_client_layer_imports_neither_the_local_gateway_nor_numpy() -> None:
    """Measured with the package's __init__ left out (it registers df.gw, so pandas and numpy load): what
    the client modules import themselves, so a client on a server without numpy or the local models
    stays possible, and the layering (client below connection, frames and local) holds."""
    package = Path(gwlab.__file__).parent
    code = (f"import sys, types; pkg = types.ModuleType('gwlab'); pkg.__path__ = [{str(package)!r}]; "
            "sys.modules['gwlab'] = pkg; import gwlab.client.gateway; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas') "
            "or m.startswith(('gwlab.local', 'gwlab.connection', 'gwlab.frames', 'gwlab.widgets'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == []


def _raised_or_warned() -> set[str]:
    """Exception and warning classes the client side defines, and the categories it warns with (the local
    gateway's own errors become HTTP answers, and a private class never leaves its module)."""
    import ast

    package = Path(gwlab.__file__).parent
    found: set[str] = set()
    for path in package.rglob("*.py"):
        if path.relative_to(package).parts[0] == "local":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                    isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception", "Warning", "Interrupt"))
                    for base in node.bases):
                found.add(node.name)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "warn" and len(node.args) > 1:
                category = node.args[1]
                if not ast.unparse(category).endswith(".category"):  # a caught warning re-issued: counted where made
                    found.add(category.id if isinstance(category, ast.Name) else ast.unparse(category))
    return found - {"ErrorEventFields"}


def test_every_error_and_warning_a_user_can_meet_is_exported_and_documented() -> None:
    documented = set(re.findall(r"^::: gwlab\.(\w+)", REFERENCE.read_text(), flags=re.M))
    missing = sorted(name for name in _raised_or_warned() if name not in gwlab.__all__ or name not in documented)
    assert missing == []


def test_an_invalid_structured_answer_is_a_gateway_error_and_still_a_value_error() -> None:
    from gwlab.wire.schema import AnswerInvalid

    assert AnswerInvalid is gwlab.AnswerInvalid
    assert issubclass(AnswerInvalid, gwlab.GatewayError) and issubclass(AnswerInvalid, ValueError)
    assert not issubclass(gwlab.RunInterrupted, gwlab.GatewayError) and issubclass(gwlab.RunInterrupted,
                                                                                    KeyboardInterrupt)
