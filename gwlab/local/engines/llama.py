"""Text generation from a GGUF file through llama-cpp-python: what every local text model shares.

A subclass says how to load its model and how to turn a conversation into a prompt (Gemma's Q/A form,
or the chat template in the file's own metadata); streaming, stop sequences, grammars and token
usage are the same for all of them.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from gwlab.local.engines._openmp import prefer_passive_waiting
from gwlab.local.engines.base import Completion, GenerationRequest, GenerationUsage, TokenLogprob
from gwlab.local.engines.turns import OWNER, TURNS

# before the native library loads anywhere in this process (it is imported lazily below)
prefer_passive_waiting()

# one generation at a time per process, whatever the number of models or generator objects: llama.cpp
# is not thread-safe and 2 cores gain nothing from two decodes at once. The turn (engines/turns.py) is
# not tied to a thread, because a thread pool may run each next() of one stream on a different thread,
# and it is handed round between keys between two tokens: `_Turn`
_in_model: dict[int, object] = {}  # id(Llama) -> the generation whose tokens its context holds


class _Turn:
    """One generation's turn on the engine, handed over to other keys between tokens and taken back.

    Taking it back after another generation used the same model restores this one's sequence: its
    tokens are evaluated again (the context holds one sequence) and its sampler (grammar, penalties,
    random state) is put back, so the answer goes on as if never interrupted. Re-evaluating a sequence
    in one batch can shift the logits in a late decimal (see `reuse_prefix`), so a seeded answer is
    reproducible only when the engine was not contended."""

    def __init__(self, llm: Any) -> None:
        self._llm, self._ticket = llm, TURNS.take(OWNER.get())
        _in_model[id(llm)] = self

    def hand_over(self) -> None:
        if not TURNS.should_yield(self._ticket):
            return
        llm = self._llm
        ids, sampler = llm.input_ids[: llm.n_tokens].tolist(), llm._sampler  # the wrapper keeps no public handle
        TURNS.give_back(self._ticket)
        self._ticket = TURNS.take(self._ticket.owner)
        if _in_model.get(id(llm)) is not self:
            llm.reset()
            llm.eval(ids)
            llm._sampler = sampler
            _in_model[id(llm)] = self

    def end(self) -> None:
        TURNS.give_back(self._ticket)


def without_extra_bufts() -> Callable[[], None]:
    """Build every llama.cpp model from now on with extra buffer types off; returns the undo.

    A natively built llama.cpp puts weights in AMX buffers on CPUs that advertise AMX, and its matmul then
    segfaults (ldtilecfg) where the VM does not grant AMX state. Llama() exposes no switch (nor does
    llama-cpp-python's server, whose test launcher calls this too), so the default model params it starts
    from are patched."""
    import llama_cpp.llama as llama_module

    default_params = llama_module.llama_cpp.llama_model_default_params

    def params_without_extra_bufts() -> Any:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_module.llama_cpp.llama_model_default_params = params_without_extra_bufts

    def restore() -> None:
        llama_module.llama_cpp.llama_model_default_params = default_params

    return restore


def load_llama(path: str, n_ctx: int) -> Any:
    """A Llama for the GGUF at `path`, extra buffer types off (`without_extra_bufts`), closed at exit."""
    import llama_cpp

    _silence_native_log(llama_cpp)
    threads = int(os.environ.get("GWLAB_LLAMA_THREADS", "2"))
    kwargs: dict[str, Any] = {"n_ctx": n_ctx, "n_threads": threads, "n_threads_batch": threads, "verbose": False}
    if os.environ.get("GWLAB_LLAMA_EXTRA_BUFTS") == "1":
        llm = llama_cpp.Llama(path, **kwargs)
    else:
        restore = without_extra_bufts()
        try:
            llm = llama_cpp.Llama(path, **kwargs)
        finally:
            restore()
    # free it while llama_cpp's module globals still exist; its __del__ at interpreter shutdown raises
    # "'NoneType' object is not callable"
    atexit.register(llm.close)
    return llm


_quiet_log: Any = None  # the ctypes callback, kept referenced while llama.cpp holds it


def _silence_native_log(llama_cpp: Any) -> None:
    """llama.cpp writes notes (e.g. its SWA cache size) to stderr even with verbose=False: in a notebook
    they print under a cell. Route its log to nothing; `GWLAB_LLAMA_LOG=1` keeps it."""
    global _quiet_log
    if _quiet_log is not None or os.environ.get("GWLAB_LLAMA_LOG") == "1":
        return
    _quiet_log = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(_quiet_log, None)


class LlamaGenerator:
    """Streams completions from one GGUF model; subclasses give `_llama()` and `build_prompt()`."""

    model_id: str
    max_input_tokens: int
    n_ctx: int
    repeat_penalty: float = 1.0
    # a prompt holds the template's control tokens as text ("<|im_start|>"); Gemma's Q/A prompt has none,
    # so there a user's "<end_of_turn>" stays text
    special_tokens_in_prompt = False

    def _llama(self) -> Any:  # pragma: no cover - every subclass has one
        raise NotImplementedError

    def build_prompt(self, system: str | None, turns: Sequence[tuple[str, str]]) -> str:
        """The prompt for a conversation of (role, text) turns, role user|assistant|tool; a last assistant
        turn is continued (a prefill)."""
        raise NotImplementedError  # pragma: no cover

    def default_stop(self) -> tuple[str, ...]:
        """Text that ends an answer besides the model's end-of-generation tokens."""
        return ()

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a prompt (with the leading <bos> where the model uses one)."""
        return len(self._tokenize(text))

    def _tokenize(self, text: str) -> list[int]:
        llm = self._llama()
        special = self.special_tokens_in_prompt
        bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "ignore") if special else ""
        add_bos = not (bos and text.startswith(bos))  # a template that writes its own <bos> gets one, not two
        return list(llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special))

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
        budget = min(request.max_tokens, self.n_ctx - len(prompt))
        if budget <= 0:
            raise ValueError(f"prompt of {len(prompt)} tokens leaves no room in the {self.n_ctx}-token context")
        grammar = None
        if request.grammar:
            grammar = llama_cpp.LlamaGrammar.from_string(request.grammar, verbose=False)
        return self._generate(request, prompt, budget, grammar, usage)

    def _generate(
        self, request: GenerationRequest, prompt: list[int], budget: int, grammar: Any, usage: GenerationUsage
    ) -> Iterator[Completion]:
        import llama_cpp

        llm = self._llama()
        stops = [s for s in request.stop if s]
        seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(4), "little")
        turn = _Turn(llm)
        try:
            # re-evaluate the whole prompt unless asked not to: llama.cpp's reuse of a cached prefix shifts
            # the logits slightly, so the same seed (even greedy decoding) gave a different text the second time
            if not request.reuse_prefix:
                llm.reset()
            llm.set_seed(seed)
            tokens: list[int] = []
            text, raw, sent, finish = "", b"", 0, "length"
            steps = _StepLogprobs(llm, request.top_logprobs) if request.top_logprobs is not None else None
            rules = [r for r in (steps, self._first_token_rule(tokens) if request.require_text else None) if r]
            pending: list[TokenLogprob] = []
            vocab = llama_cpp.llama_model_get_vocab(llm.model)  # the public C API, not the wrapper's private _model
            for token in llm.generate(
                prompt, temp=max(request.temperature, 0.0), repeat_penalty=self.repeat_penalty, grammar=grammar,
                logits_processor=llama_cpp.LogitsProcessorList(rules) if rules else None,
            ):
                # llama.cpp's own completion loop asks the vocab the same way
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                tokens.append(token)
                usage.completion_tokens = len(tokens)
                grown = llm.detokenize(tokens, prev_tokens=prompt)
                if steps is not None:
                    data = grown[len(raw):] if grown.startswith(raw) else llm.detokenize([token])
                    pending.append(steps.of(token, data))
                raw = grown
                text = raw.decode("utf-8", errors="ignore")
                cut = _first_stop(text, stops, sent)
                if cut is not None:
                    text, finish = text[:cut], "stop"
                    break
                if len(tokens) >= budget:  # out of tokens: a tail that began a stop sequence ("\nQ") goes
                    text = text[:max(sent, len(text) - _held_back(text, stops))]
                    break
                safe = len(text) - _held_back(text, stops)
                if safe > sent:
                    yield Completion(text[sent:safe], tokens=pending)
                    sent, pending = safe, []
                turn.hand_over()
            yield Completion(text[sent:], finish_reason=finish, tokens=pending)
        finally:
            turn.end()

    def _first_token_rule(self, tokens: list[int]) -> Any:
        """A logits processor ruling out, while `tokens` is empty, every token that cannot begin a visible
        answer: deterministic (one masked step, then the same sampling) and bounded (no retry). The base
        Gemma ended "Reply with one short friendly sentence" at once for some seeds (docs/gateway.md)."""

        blank = self._blank_starts()

        def rule(_ids: Any, scores: Any) -> Any:
            if not tokens:
                scores[blank] = -np.inf
            return scores

        return rule

    def _blank_starts(self) -> Any:
        """Ids of the tokens that show nothing or start a new line (ends and control tokens decode to
        nothing): computed once per model, over its whole vocabulary."""
        blank = getattr(self, "_blank_ids", None)
        if blank is None:
            llm = self._llama()
            pieces = (llm.detokenize([i]).decode("utf-8", "ignore") for i in range(llm.n_vocab()))
            blank = np.array([i for i, p in enumerate(pieces) if not p.strip() or p.startswith("\n")], dtype=np.intp)
            self._blank_ids = blank
        return blank

    def complete(self, request: GenerationRequest, usage: GenerationUsage | None = None) -> Completion:
        """The whole completion at once (a convenience over `stream`)."""
        pieces = list(self.stream(request, usage if usage is not None else GenerationUsage()))
        return Completion("".join(p.text for p in pieces), pieces[-1].finish_reason)

    def json_grammar(self, schema: Mapping[str, Any]) -> str:
        """GBNF that forces output valid against `schema` (see `json_grammar`)."""
        return json_grammar(schema)


class _StepLogprobs:
    """A logits processor that keeps each step's log-softmax, read before any other rule, penalty, grammar
    or temperature touches the logits: the model's raw distribution, as OpenAI reports logprobs. Only the
    last step is held (one vocabulary of floats), never context x vocabulary as llama.cpp's `logits_all`."""

    def __init__(self, llm: Any, top: int) -> None:
        self._llm, self._top = llm, top
        self._last: Any = None

    def __call__(self, _ids: Any, scores: Any) -> Any:
        logits = np.asarray(scores, dtype=np.float64)
        peak = logits.max()
        self._last = logits - (peak + np.log(np.exp(logits - peak).sum()))
        return scores

    def of(self, token: int, data: bytes) -> TokenLogprob:
        """The sampled `token` (its bytes in the text: `data`) at the step just recorded."""
        step = self._last
        best = np.argpartition(-step, self._top)[:self._top] if self._top else np.array([], dtype=np.intp)
        best = best[np.argsort(-step[best], kind="stable")]
        top = tuple((self._llm.detokenize([int(i)]), float(step[i])) for i in best)
        return TokenLogprob(data, float(step[token]), top)


# a GBNF character class (`[^...]` or `[...]`, with its escapes) or a quoted literal; a class is tried
# first, so a quote inside a class is not read as the start of a literal
_TERMINAL = re.compile(r'\[(\^?)((?:\\.|[^\]\\])*)\]|"((?:\\.|[^"\\])*)"')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")
_NAMED = {"n": "\n", "r": "\r", "t": "\t"}
# what JSON forbids raw inside a string: the quote, the backslash and U+0000-U+001F (RFC 8259, section 7)
_NOT_IN_A_STRING = r'"\\\x00-\x1F'
_SHORT = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f"}


def json_grammar(schema: Mapping[str, Any]) -> str:
    """GBNF that forces output valid against `schema`, and always valid JSON.

    llama.cpp's converter writes a string character as `[^"\\]`, which let a raw newline (or any
    control character) into a string, so answers asked for "several lines" did not parse. Every class
    or literal it writes with a control character sits inside a string (JSON's own whitespace here is
    `" "?`), so a negated class is narrowed to leave out what JSON forbids there, and a control
    character that a `pattern`'s literal or class names is written escaped (`\\n`)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return _TERMINAL.sub(_json_safe, json_schema_to_gbnf(json.dumps(schema)))


def _json_safe(match: re.Match[str]) -> str:
    """One terminal, rewritten so that it cannot put a raw control character into a JSON string."""
    negated, members, literal = match.groups()
    if literal is not None:
        chars = _decoded(literal)
        if all(c >= " " for c in chars):
            return match.group(0)
        return '"' + "".join(_escaped(c) if c < " " else '\\' + c if c in '"\\' else c for c in chars) + '"'
    if negated:
        return f"[^{members}{_NOT_IN_A_STRING}]"
    ranges = _ranges(_decoded(members))
    controls = [chr(c) for c in range(32) if any(lo <= chr(c) <= hi for lo, hi in ranges)]
    if not controls:
        return match.group(0)
    kept = [(max(lo, " "), hi) for lo, hi in ranges if hi >= " "]
    options = [f'"{_escaped(c)}"' for c in controls]
    if kept:
        options.insert(0, "[" + "".join(_code(lo) + ("" if lo == hi else "-" + _code(hi)) for lo, hi in kept) + "]")
    return "(" + " | ".join(options) + ")"


def _decoded(text: str) -> list[str]:
    """The characters a GBNF literal or class body stands for, its escapes decoded."""
    out, i = [], 0
    while i < len(text):
        escape = _ESCAPE.match(text, i)
        if escape:
            code = escape.group(1)
            out.append(chr(int(code[1:], 16)) if len(code) > 1 else _NAMED.get(code, code))
            i = escape.end()
        else:
            out.append(text[i])
            i += 1
    return out


def _ranges(chars: list[str]) -> list[tuple[str, str]]:
    """A class body's members as (low, high) pairs: `a-z` is one, a lone `x` is (x, x)."""
    out, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            out.append((chars[i], chars[i + 2]))
            i += 3
        else:
            out.append((chars[i], chars[i]))
            i += 1
    return out


def _escaped(char: str) -> str:
    """A control character as GBNF for its JSON escape: a newline becomes the two characters `\\n`."""
    return "\\\\" + (_SHORT.get(char) or f"u{ord(char):04x}")


def _code(char: str) -> str:
    """A character as a GBNF class member: letters and digits as they are, anything else by its code."""
    return char if char.isalnum() and char.isascii() else f"\\U{ord(char):08X}"


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
