"""Blocking for a large merge: the pairs worth asking, by a similarity that sends nothing (TF-IDF)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gwlab.errors import InvalidRequest
from gwlab.frames.operators.shared import check_threshold

__all__ = ["Blocking", "Similarity", "candidate_pairs", "tfidf_similarity"]

Similarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Blocking:
    """How a large merge picks the pairs worth asking: the `candidates` most similar right rows per left
    row, by `similarity` (left texts, right texts) -> matrix; default TF-IDF cosine, which sends nothing.
    A gateway's /v1/embeddings can be plugged in here as a `similarity`."""

    candidates: int = 5
    threshold: float = 0.5  # a pair matches when its condition's probability reaches it
    similarity: Similarity | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.candidates, int) and not isinstance(self.candidates, bool) and self.candidates >= 1):
            raise InvalidRequest("blocking", f"candidates must be a positive integer; got {self.candidates!r}")
        check_threshold(self.threshold, "blocking")


def tfidf_similarity(left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    """Cosine similarity of word TF-IDF vectors (numpy only): a blocking step that costs no request."""
    docs = [_words(t) for t in [*left, *right]]
    vocabulary = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
    counts = np.zeros((len(docs), max(len(vocabulary), 1)))
    for row, words in enumerate(docs):
        for word in words:
            counts[row, vocabulary[word]] += 1
    idf = np.log((1 + len(docs)) / (1 + (counts > 0).sum(axis=0))) + 1
    vectors = counts * idf
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity: np.ndarray = vectors[: len(left)] @ vectors[len(left):].T
    return similarity


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def candidate_pairs(left: list[str | None], right: list[str | None], m: int,
                     similarity: Similarity) -> list[tuple[int, int]]:
    """(left position, right position) for each left row's `m` most similar right rows."""
    rows = [i for i, t in enumerate(left) if t is not None]
    if not rows:
        return []
    texts = [t for t in left if t is not None]  # in the order of `rows`
    scores = np.asarray(similarity(texts, [str(t) for t in right]), dtype=np.float64)
    if scores.shape != (len(rows), len(right)):
        raise InvalidRequest("blocking", f"similarity must return a {len(rows)} x {len(right)} matrix; "
                                         f"got shape {scores.shape}")
    best = np.argsort(-scores, axis=1, kind="stable")[:, :m]
    return [(i, int(j)) for i, row in zip(rows, best, strict=True) for j in row]
