"""Any instruction-tuned GGUF file as a chat model, prompted with the chat template in its own metadata.

This is how the bundled SmolLM2-135M-Instruct is served, and how a user's own model is
(`gwlab serve --gguf NAME=PATH`, `gwlab.local.start(gguf={NAME: PATH})`, `GWLAB_GGUF`). A file is checked
when the gateway starts, never on the first request: it must exist, begin with the GGUF magic bytes,
carry `tokenizer.chat_template`, and load; otherwise `GgufError` names the file and the gateway does
not start.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gwlab.errors import InvalidRequest
from gwlab.local.engines.base import LoadOnce
from gwlab.local.engines.llama import LlamaGenerator, load_llama

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage

MAGIC = b"GGUF"
# a model's trained context can be 32k-128k tokens, whose KV cache alone is gigabytes: serve at most
# this many (GWLAB_GGUF_MAX_CTX raises it); max_input_tokens in GET /models is what is served, minus one
MAX_CTX_DEFAULT = 4096


class GgufError(InvalidRequest):
    """A GGUF file that cannot be served; `field` is where it was given (e.g. `gguf.NAME`)."""


def max_ctx() -> int:
    return int(os.environ.get("GWLAB_GGUF_MAX_CTX", MAX_CTX_DEFAULT))


def check_file(path: str | Path, field: str) -> Path:
    """The file as an absolute path, if it exists and starts with the GGUF magic bytes."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise GgufError(field, f"no such file: {file}" if not file.exists() else f"not a file: {file}")
    with file.open("rb") as f:
        head = f.read(4)
    if head != MAGIC:
        raise GgufError(field, f"{file} is not a GGUF file (it starts with {head!r}, not {MAGIC!r})")
    return file.resolve()


class ChatTemplateGenerator(LlamaGenerator):
    """A GGUF model whose prompt is its own chat template; loads on first use or on `load()`."""

    special_tokens_in_prompt = True
    default_system: str | None = None  # used when the caller sends no system text

    def __init__(self, model_id: str, path: str | Path, *, field: str = "gguf") -> None:
        self.model_id, self.field = model_id, field
        self.path = check_file(path, field)
        self._loaded = LoadOnce(self._build)
        self._read_metadata()

    def _read_metadata(self) -> None:
        """Context and chat template from the file's header (a vocab-only load, ~0.1 s), so that GET /models
        can list `max_input_tokens` before the weights are loaded."""
        import llama_cpp

        from gwlab.local.engines.llama import _silence_native_log

        _silence_native_log(llama_cpp)
        try:
            vocab = llama_cpp.Llama(str(self.path), vocab_only=True, verbose=False)
        except Exception as exc:
            raise GgufError(self.field, f"llama.cpp could not read {self.path}: {exc}") from None
        try:
            meta = vocab.metadata
            template = meta.get("tokenizer.chat_template")
            if not template:
                raise GgufError(self.field, f"{self.path} has no chat template (tokenizer.chat_template) in its "
                                "metadata: only instruction-tuned models with a template can be served for chat")
            self.template: str = template
            trained = int(meta.get(f"{meta.get('general.architecture', 'llama')}.context_length", 0) or 0)
            self.n_ctx = min(trained, max_ctx()) if trained > 0 else min(2048, max_ctx())
            self.max_input_tokens = self.n_ctx - 1  # room for at least one answer token
            self.bos = vocab.detokenize([vocab.token_bos()], special=True).decode("utf-8", "ignore")
            self.eos = vocab.detokenize([vocab.token_eos()], special=True).decode("utf-8", "ignore")
        finally:
            vocab.close()

    def _llama(self) -> Any:
        return self._loaded()

    def load(self) -> None:
        """Load the weights now (at gateway start), so a file llama.cpp cannot load fails there."""
        self._llama()

    def _build(self) -> Any:
        try:
            return load_llama(str(self.path), self.n_ctx)
        except Exception as exc:
            raise GgufError(self.field, f"llama.cpp could not load {self.path}: {exc}") from None

    def build_prompt(self, system: str | None, turns: Sequence[tuple[str, str]]) -> str:
        """The conversation rendered by the model's template. A tool result becomes a user message
        ("Result: ..."), since many templates refuse a `tool` role or roles out of alternation; consecutive
        messages of one role are joined for the same reason. A last assistant turn is a prefill: the
        template's generation prompt, then its text, which the model continues."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        system = (system or "").strip() or self.default_system
        messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
        prefill = None
        for i, (role, text) in enumerate(turns):
            if role not in ("user", "assistant", "tool"):
                raise ValueError(f"unknown role {role!r} (expected user, assistant or tool)")
            if role == "assistant" and i == len(turns) - 1:
                prefill = text.strip()
                break
            role, text = ("user", f"Result: {text}") if role == "tool" else (role, text)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"] += "\n\n" + text
            else:
                messages.append({"role": role, "content": text})
        formatter = Jinja2ChatFormatter(self.template, self.eos, self.bos, add_generation_prompt=True)
        try:
            prompt = formatter(messages=_as_chat(messages)).prompt
        except Exception:
            if not messages or messages[0]["role"] != "system":
                raise
            # some templates refuse a system role (Gemma 2's, Mistral's): its text opens the first user turn
            prompt = formatter(messages=_as_chat(_fold_system(messages))).prompt
        return prompt + prefill if prefill else prompt


def _fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    if rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
        return rest
    return [{"role": "user", "content": system}, *rest]


def _as_chat(messages: list[dict[str, str]]) -> list[ChatCompletionRequestMessage]:
    """Plain {"role", "content"} dicts as llama_cpp's role-specific TypedDicts, which they are shaped as."""
    return cast("list[ChatCompletionRequestMessage]", messages)
