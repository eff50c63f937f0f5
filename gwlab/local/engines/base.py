"""One small interface per local ability; an engine is whatever has these methods (no base class)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from gwlab.wire.decisions import Question as Question  # one definition, validated on the wire; re-exported here

T = TypeVar("T")


class LoadOnce(Generic[T]):
    """A model built by `load` on first use, once per holder even when threads race for it (the weights
    cost a second and hundreds of MB; a second copy would double both)."""

    def __init__(self, load: Callable[[], T]) -> None:
        self._load, self._lock = load, threading.Lock()
        self._built: list[T] = []  # empty until loaded (the model itself may be any value)

    def __call__(self) -> T:
        if not self._built:
            with self._lock:
                if not self._built:
                    self._built.append(self._load())
        return self._built[0]


class InputTooLong(ValueError):
    """An input over a model's documented limit (`max_input_tokens` in GET /models): a 400, never a
    silent truncation or a minutes-long answer. `tokens` is exact, or a lower bound when `exact` is False
    (a long text is refused after counting only as much of it as shows it is over)."""

    def __init__(self, what: str, tokens: int, limit: int, model: str, *, exact: bool = True) -> None:
        self.tokens, self.limit, self.model, self.exact = tokens, limit, model, exact
        size = f"{tokens} tokens" if exact else f"more than {limit} tokens (about {tokens})"
        super().__init__(f"{what} is {size}; {model} reads at most {limit} tokens: shorten it or split it "
                         "into parts and ask about each")


@dataclass(slots=True)
class Decision:
    """What a decider returns: answers keyed like the request, plus real input token usage."""

    answers: dict[str, dict[str, Any]]
    input_tokens: int
    # part of input_tokens whose embeddings came from the cache (for usage.input_tokens_details.cached_tokens)
    cached_input_tokens: int = 0


class Decider(Protocol):
    model_id: str

    def decide(self, state: str, questions: Mapping[str, Question], *, temperature: float = ...) -> Decision:
        """Answer every question about `state` (already rendered to text)."""
        ...

    def check_length(self, text: str, what: str = ...) -> int:
        """The tokens of `text`, or InputTooLong naming `what` when over the model's limit."""
        ...

    def embed(self, texts: Sequence[str]) -> Any:
        """One unit vector per text (a 2-D float array), for POST /v1/embeddings."""
        ...


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token's log-probability under the model's raw distribution (the step's logits at
    temperature 1, before repeat penalty and grammar, as OpenAI reports them), and the `top` most likely
    tokens at that step as (bytes, logprob), most likely first."""

    data: bytes
    logprob: float
    top: tuple[tuple[bytes, float], ...] = ()


@dataclass(slots=True)
class Completion:
    """One generated piece (streamed) and, on the last one, the finish reason."""

    text: str
    finish_reason: str | None = None  # "stop" | "length" on the final piece
    # with GenerationRequest.top_logprobs set: the tokens produced since the previous piece (the last piece
    # also carries those whose text a stop sequence cut); their bytes join to the raw generated text
    tokens: list[TokenLogprob] = field(default_factory=list)


@dataclass(slots=True)
class GenerationUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(slots=True)
class GenerationRequest:
    prompt: str
    max_tokens: int = 256
    temperature: float = 0.7
    stop: Sequence[str] = field(default_factory=tuple)
    seed: int | None = None
    grammar: str | None = None  # GBNF, e.g. from a JSON schema, to force well-formed output
    # evaluate only what differs from the engine's cached prompt: a much sooner first token in a growing
    # conversation, but a seeded request is then no longer reproducible (the cached logits differ slightly)
    reuse_prefix: bool = False
    # an answer asked for as text: its first token must show something (not an end, not blank, not a newline,
    # with which every default stop sequence begins), so the answer is never empty
    require_text: bool = False
    # None: no log-probabilities; 0-20: each token's logprob and that many alternatives (Completion.tokens)
    top_logprobs: int | None = None


class TextGenerator(Protocol):
    model_id: str

    def count_tokens(self, text: str) -> int: ...

    def stream(self, request: GenerationRequest, usage: GenerationUsage) -> Iterator[Completion]:
        """Yield pieces of text as they are produced; fill `usage` with real token counts."""
        ...

    def json_grammar(self, schema: Mapping[str, Any]) -> str:
        """A grammar that forces output valid against the JSON schema."""
        ...


class Transcriber(Protocol):
    model_id: str

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        """The text spoken in mono signed 16-bit little-endian PCM at `sample_rate`."""
        ...


class Speaker(Protocol):
    model_id: str

    def speak(self, text: str, voice: str) -> tuple[bytes, int]:
        """Speech for `text` as mono signed 16-bit little-endian PCM, and its sample rate."""
        ...
