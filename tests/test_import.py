"""`import gwlab` stays light: what a notebook pays before its first call."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("jsonschema", "llama_cpp", "uvicorn", "fastapi", "gwlab.local", "gwlab.widgets", "ipywidgets",
         "matplotlib", "faster_whisper", "aiortc")


def test_importing_gwlab_loads_no_server_model_widget_or_schema_library() -> None:
    code = f"import sys, gwlab; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == []
