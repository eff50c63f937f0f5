"""`%%gw chat` in a real kernel saves one output, not one per token.

A notebook executed by nbclient (as the demo and the headless evaluations run) keeps every stream message
as an output, and the exported HTML showed the answer one token per line. The magic streams into one
display it updates (`display_id`), which nbclient, JupyterLab and the saved file keep as one output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nbclient")

import nbformat

from gwlab import demo

CELL = "%%gw chat --model local/gemma-3-270m --max-tokens 24\nQ: Name three colours.\nA:"


def test_a_chat_cell_saves_one_output_holding_the_answer_and_its_usage_line(gateway: Any, tmp_path: Path) -> None:
    path = tmp_path / "chat.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext gwlab"),
                                               nbformat.v4.new_code_cell(CELL)])
    nbformat.write(notebook, path)
    env = {**os.environ, "GWLAB_BASE_URL": gateway.base_url, "GWLAB_API_KEY": gateway.api_key}
    outputs = demo.execute(path, env=env).cells[1].outputs
    assert len(outputs) == 1, [o.get("output_type") for o in outputs]
    text = outputs[0]["data"]["text/plain"]
    assert text.splitlines()[-1].startswith("[gw] chat · local/gemma-3-270m · ")
    assert gateway.api_key not in text
