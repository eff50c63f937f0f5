"""Operators across rows (`df.gw.filter`, `merge`, `topk`, `aggregate`), each built on the row runner.

Each operator turns a question about many rows into ordinary `df.gw` runs (decisions for the row-level
questions, a text family for `aggregate`), so every request is deduplicated, checkpointed, budgeted and
piloted exactly as a `decide` or `chat` run is; a resumed operator asks the checkpoint first and pays
nothing twice. What an operator did, over all its runs, is one `OperatorSummary` on the result's `.run`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.budget import BYTES_PER_TOKEN, input_text
from gwlab.frames.outcome import RunSummary
from gwlab.frames.result import BatchFrame
from gwlab.frames.run_config import RunConfig
from gwlab.frames.templates import Template
from gwlab.wire.limits import MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_SCORE_LEVELS, MIN_SCORE_LEVELS

__all__ = ["Blocking", "FilterWarning", "MergePlan", "OperatorFrame", "OperatorSummary", "tfidf_similarity"]

# the small side of a merge leaves room under the choice limit: one option is "none", and a few spare
# keep a right frame that grows by a row or two on the same strategy (and the same checkpointed answers)
CHOICE_MARGIN = 5
SMALL_RIGHT = MAX_CHOICE_OPTIONS - 1 - CHOICE_MARGIN
NONE_OPTION = "none"
DEFAULT_STRENGTHS = ("not at all", "somewhat", "very much")
# a chunk of an aggregate is packed to this share of the input limit: BYTES_PER_TOKEN guesses a row's
# tokens within about a quarter either way (frames/budget.py), so a full chunk may really be 4/3 larger
PACK_SHARE = 0.75
# the options a run of the operator's own frames must not inherit: it builds those frames itself
_OWN = ("join", "prefix")

Similarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]


@dataclass
class OperatorSummary:
    """What an operator's runs did together: requests, cache hits, tokens, and its own counts."""

    operator: str
    rows: int = 0
    requests: int = 0  # distinct requests of every run (sent + cached + not run)
    sent: int = 0
    cached: int = 0
    error_rows: int = 0
    not_run_rows: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    comparisons: int = 0  # topk: pairwise comparisons asked
    levels: int = 0  # aggregate: map-reduce levels run
    strategy: str = ""  # merge: "choice" or "pairwise"
    kept: int | None = None  # filter: rows that passed
    stopped: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)  # each run's RunSummary, as a dict

    def add(self, summary: RunSummary) -> None:
        """Count one run of the operator in."""
        self.requests += summary.requests
        self.sent += summary.sent
        self.cached += summary.cached
        self.error_rows += summary.error_rows
        self.not_run_rows += summary.not_run_rows
        self.input_tokens += summary.input_tokens
        self.output_tokens += summary.output_tokens
        self.stopped = self.stopped or summary.stopped
        self.runs.append(dataclasses.asdict(summary))

    def text(self) -> str:
        extra = {"comparisons": self.comparisons, "levels": self.levels}
        shown = "".join(f", {value} {name}" for name, value in extra.items() if value)
        strategy = f" ({self.strategy})" if self.strategy else ""
        kept = f", kept {self.kept} of {self.rows}" if self.kept is not None else ""
        line = (f"{self.operator}{strategy}: {self.rows} rows{kept}, {self.requests} requests in "
                f"{len(self.runs)} runs: "
                f"{self.sent} sent, {self.cached} cached{shown} · {self.input_tokens} in / {self.output_tokens} "
                "out tokens")
        return line + (f" · stopped: {self.stopped}" if self.stopped else "")


class OperatorFrame(BatchFrame):
    """An operator's result: `.run` is its `OperatorSummary`; `.answers` the row answers it chose from."""

    _metadata: ClassVar[list[str]] = ["run", "answers"]
    answers: pd.DataFrame | None

    @classmethod
    def of(cls, frame: pd.DataFrame, summary: OperatorSummary, answers: pd.DataFrame | None = None
           ) -> OperatorFrame:
        out = cls.wrap(frame, summary)  # type: ignore[arg-type]
        out.answers = answers
        return out  # type: ignore[return-value]


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
        _check_threshold(self.threshold, "blocking")


@dataclass(frozen=True)
class MergePlan:
    """What a merge will send, known before anything is: `requests` against asking every pair."""

    strategy: Literal["choice", "pairwise"]
    left_rows: int
    right_rows: int
    requests: int  # distinct decision requests (a checkpoint may answer some of them)
    pairwise: int  # requests if every (left, right) pair were asked
    candidates: int | None = None  # pairwise: right rows asked about per left row

    def __str__(self) -> str:
        how = ("one choice question per left row over the right rows" if self.strategy == "choice"
               else f"a condition per pair for the {self.candidates} most similar right rows per left row")
        return (f"merge {self.left_rows} x {self.right_rows} rows: {self.requests} requests ({how}); "
                f"asking every pair: {self.pairwise}")


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
    return vectors[: len(left)] @ vectors[len(left):].T


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def _check_threshold(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidRequest(name, f"threshold must be a probability between 0 and 1; got {value!r}")


def _check_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(name, f"must be a non-empty text; got {value!r}")
    return value


def _own_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], RunConfig]:
    """The options every run of the operator takes (checked once, now), and the config they make."""
    config = RunConfig.of("rows", options)
    return {k: v for k, v in options.items() if k not in _OWN}, config


def texts(frame: pd.DataFrame, spec: Any, field_name: str, blank: str) -> tuple[list[str | None], dict[int, str]]:
    """Each row's text under a template (default: every column, as a JSON object); failures by position."""
    template = Template.parse(list(frame.columns) if spec is None else spec, frame.columns, field=field_name)
    rows = template.rows(frame, blank=blank)
    out = [None if code < 0 else input_text(rows.value(int(code))) for code in rows.codes]
    return out, dict(rows.errors)


def finish(frame: pd.DataFrame, added: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """The operator's columns (prefixed), after the input columns unless join=False."""
    added = added.rename(columns=lambda c: f"{config.prefix}{c}")
    if not config.join:
        return added
    clash = [c for c in added.columns if c in frame.columns]
    if clash:
        raise InvalidRequest("prefix", f"the frame already has column {clash[0]!r}; pass prefix='...' or join=False")
    return pd.concat([frame, added.set_axis(frame.index)], axis=1)


# --- filter ------------------------------------------------------------------------------------------

async def filter_rows(frame: pd.DataFrame, condition: str, state: Any, threshold: float, name: str,
                      model: str | None, options: dict[str, Any], cascade: Any = None) -> OperatorFrame:
    """The rows whose condition's probability reaches `threshold`; `.answers` holds every row's. With a
    cascade (`gwlab.Cascade`), that one decide run is a cascade and a row is kept by its answer, the
    cheap model's where it was sure and the oracle's elsewhere."""
    _check_text(condition, "condition")
    _check_threshold(threshold, "threshold")
    own, config = _own_options(options)
    question = {name: {"type": "noul", "instructions": condition}}
    spec = list(frame.columns) if state is None else state
    answers = await frame.gw.adecide(spec, question, model=model, cascade=cascade, **own, join=False)
    probability = answers[f"{name}__noul"]
    keep = (probability >= threshold).to_numpy()  # NaN (an error row) is never kept
    shown = [f"{name}__noul"]
    if cascade is not None:  # the cascade's answer decides: a missing one (unpaid, failed) is never kept
        keep = answers[f"{name}__answer"].map(lambda v: v is True or v == True).to_numpy(dtype=bool)  # noqa: E712
        shown += [f"{name}__answer", f"{name}__source"]
    summary = OperatorSummary("filter", rows=len(frame), kept=int(keep.sum()))
    summary.add(answers.run)
    _warn_none_kept(summary, probability, threshold)
    out = finish(frame, answers[shown], config)
    return OperatorFrame.of(out[keep], summary, pd.DataFrame(answers))


class FilterWarning(UserWarning):
    """A filter ran, but what it kept needs a second look (no row passed)."""


def _warn_none_kept(summary: OperatorSummary, probability: pd.Series, threshold: float) -> None:
    """No row passing is rarely what the user meant: say so, with the highest probability seen."""
    if summary.kept or not summary.rows:
        return
    top = probability.max()
    seen = f"the highest P(true) is {top:.2f}" if top == top else "no row was answered"
    warnings.warn(f"filter kept 0 of {summary.rows} rows: {seen}, below threshold={threshold}; see .answers "
                  "for every row's probability", FilterWarning, stacklevel=4)


# --- merge -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MergeSpec:
    """A merge's settings beyond the run options, checked once."""

    condition: str
    left_on: Any = None
    right_on: Any = None
    how: str = "inner"
    model: str | None = None
    blocking: Blocking = field(default_factory=Blocking)

    def __post_init__(self) -> None:
        _check_text(self.condition, "condition")
        if self.how not in ("inner", "left"):
            raise InvalidRequest("how", f"must be 'inner' or 'left'; got {self.how!r}")
        if not isinstance(self.blocking, Blocking):
            raise InvalidRequest("blocking", f"a gwlab Blocking(...); got {type(self.blocking).__name__}")


def merge_plan(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, config: RunConfig) -> tuple[MergePlan, Any]:
    """The plan, and what carrying it out needs (the texts and, for pairwise, the candidate pairs)."""
    if not isinstance(right, pd.DataFrame):
        raise InvalidRequest("right", f"a pandas DataFrame; got {type(right).__name__}")
    if right.empty:
        raise InvalidRequest("right", "has no rows")
    left_texts, left_errors = texts(left, spec.left_on, "left_on", config.blank)
    right_texts, right_errors = texts(right, spec.right_on, "right_on", config.blank)
    if right_errors:  # a right row without a description can be no option and no pair
        position, message = min(right_errors.items())
        raise InvalidRequest("right_on", f"right row {right.index[position]!r}: {message}")
    if left_errors and config.errors == "raise":
        position, message = min(left_errors.items())
        raise InvalidRequest("left_on", f"row {left.index[position]!r}: {message} (errors='coerce' leaves it "
                                        "unmatched)")
    distinct = len({t for t in left_texts if t is not None})
    if len(right) <= SMALL_RIGHT:
        plan = MergePlan("choice", len(left), len(right), distinct, distinct * len(right))
        return plan, (left_texts, right_texts, None)
    m = min(spec.blocking.candidates, len(right))
    pairs = _candidate_pairs(left_texts, right_texts, m, spec.blocking.similarity or tfidf_similarity)
    requests = len({(left_texts[i], right_texts[j]) for i, j in pairs})
    plan = MergePlan("pairwise", len(left), len(right), requests, distinct * len(right), m)
    return plan, (left_texts, right_texts, pairs)


def _candidate_pairs(left: list[str | None], right: list[str | None], m: int,
                     similarity: Similarity) -> list[tuple[int, int]]:
    """(left position, right position) for each left row's `m` most similar right rows."""
    rows = [i for i, t in enumerate(left) if t is not None]
    if not rows:
        return []
    scores = np.asarray(similarity([left[i] for i in rows], [str(t) for t in right]), dtype=float)
    if scores.shape != (len(rows), len(right)):
        raise InvalidRequest("blocking", f"similarity must return a {len(rows)} x {len(right)} matrix; "
                                         f"got shape {scores.shape}")
    best = np.argsort(-scores, axis=1, kind="stable")[:, :m]
    return [(i, int(j)) for i, row in zip(rows, best, strict=True) for j in row]


def plan(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, options: Mapping[str, Any]) -> MergePlan:
    """What `merge` would send, without a gateway (the options are checked as the run would)."""
    return merge_plan(left, right, spec, _own_options(options)[1])[0]


async def merge(left: pd.DataFrame, right: pd.DataFrame, spec: MergeSpec, dry_run: bool,
                options: dict[str, Any]) -> OperatorFrame | MergePlan:
    """Pair rows of `left` and `right` by `spec.condition`; with `dry_run`, only the plan."""
    own, config = _own_options(options)
    plan, (left_texts, right_texts, pairs) = merge_plan(left, right, spec, config)
    if dry_run:
        return plan
    summary = OperatorSummary("merge", rows=len(left), strategy=plan.strategy)
    if plan.strategy == "choice":
        matched = await _merge_by_choice(left, right_texts, spec, own, summary)
    else:
        matched = await _merge_pairwise(left_texts, right_texts, pairs, spec, own, summary)
    return OperatorFrame.of(_joined(left, right, matched, spec.how, config), summary)


async def _merge_by_choice(left: pd.DataFrame, right_texts: list[str | None], spec: MergeSpec,
                           own: dict[str, Any], summary: OperatorSummary) -> pd.DataFrame:
    """One choice question per left row whose options are the right rows (and "none")."""
    criteria = {f"r{j}": str(text) for j, text in enumerate(right_texts)}
    criteria[NONE_OPTION] = f"none of these: no option meets the condition ({spec.condition})"
    question = {"match": {"type": "choice", "instructions": spec.condition, "criteria": criteria}}
    state = list(left.columns) if spec.left_on is None else spec.left_on
    answers = await left.gw.adecide(state, question, model=spec.model, **own, join=False)
    summary.add(answers.run)
    chosen = answers["match__choice"].to_numpy(dtype=object)
    rows = []
    for i, option in enumerate(chosen):
        if isinstance(option, str) and option != NONE_OPTION:
            rows.append((i, int(option[1:]), float(answers[f"match__p__{option}"].iloc[i])))
    return pd.DataFrame(rows, columns=["left", "right", "p"])


async def _merge_pairwise(left_texts: list[str | None], right_texts: list[str | None], pairs: list[tuple[int, int]],
                          spec: MergeSpec, own: dict[str, Any], summary: OperatorSummary) -> pd.DataFrame:
    """A noul condition per candidate pair; the pairs whose probability reaches the threshold."""
    frame = pd.DataFrame({"left": [left_texts[i] for i, _ in pairs], "right": [right_texts[j] for _, j in pairs]})
    question = {"match": {"type": "noul", "instructions": spec.condition}}
    answers = await frame.gw.adecide(["left", "right"], question, model=spec.model, **own, join=False)
    summary.add(answers.run)
    p = answers["match__noul"].to_numpy(dtype=float)
    keep = p >= spec.blocking.threshold
    return pd.DataFrame({"left": [i for (i, _), k in zip(pairs, keep, strict=True) if k],
                         "right": [j for (_, j), k in zip(pairs, keep, strict=True) if k], "p": p[keep]})


def _joined(left: pd.DataFrame, right: pd.DataFrame, matched: pd.DataFrame, how: str,
            config: RunConfig) -> pd.DataFrame:
    """Left rows with their matched right rows (pandas' suffixes on clashing names), on the left's index."""
    if how == "left":
        unmatched = sorted(set(range(len(left))) - set(matched["left"]))
        extra = pd.DataFrame({"left": unmatched, "right": -1, "p": np.nan})
        matched = pd.concat([matched, extra]).sort_values("left", kind="stable")
    rights = right.iloc[matched["right"].clip(lower=0)].reset_index(drop=True)
    rights[(matched["right"] < 0).to_numpy()] = None
    lefts = left.iloc[matched["left"]]
    added = pd.DataFrame({f"{config.prefix}match__p": matched["p"].to_numpy(),
                          f"{config.prefix}right_index": right.index[matched["right"].clip(lower=0)]})
    added.loc[(matched["right"] < 0).to_numpy(), f"{config.prefix}right_index"] = None
    both = set(left.columns) & set(right.columns)
    rights.columns = [f"{c}_y" if c in both else c for c in rights.columns]
    if not config.join:
        return added.set_axis(lefts.index)
    lefts = lefts.rename(columns={c: f"{c}_x" for c in both})
    return pd.concat([lefts.reset_index(drop=True), rights, added], axis=1).set_axis(lefts.index)


# --- top k -------------------------------------------------------------------------------------------

def score_levels(criterion: str, levels: Sequence[str] | None) -> list[str]:
    """The score question's levels, lowest first: the user's, or the criterion at three strengths (a
    decision model reads each level as a text to match, so a level names what it describes)."""
    if levels is None:
        return [f"{strength}: {criterion}" for strength in DEFAULT_STRENGTHS]
    if isinstance(levels, str) or not (MIN_SCORE_LEVELS <= len(levels) <= MAX_SCORE_LEVELS) or \
            not all(isinstance(level, str) and level.strip() for level in levels):
        raise InvalidRequest("levels", f"{MIN_SCORE_LEVELS} to {MAX_SCORE_LEVELS} non-empty texts, lowest first; "
                                       f"got {levels!r}")
    return list(levels)


async def topk(frame: pd.DataFrame, criterion: str, k: int, state: Any, window: int, model: str | None,
               options: dict[str, Any]) -> OperatorFrame:
    """The `k` rows that best meet `criterion`: a score per row, then comparisons around the cut."""
    _check_text(criterion, "criterion")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(frame):
        raise InvalidRequest("k", f"must be an integer from 1 to the frame's {len(frame)} rows; got {k!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InvalidRequest("window", f"must be a non-negative integer; got {window!r}")
    levels = score_levels(criterion, options.pop("levels", None))
    own, config = _own_options(options)
    spec = list(frame.columns) if state is None else state
    question = {"score": {"type": "score", "instructions": criterion, "criteria": levels}}
    answers = await frame.gw.adecide(spec, question, model=model, **own, join=False)
    summary = OperatorSummary("topk", rows=len(frame))
    summary.add(answers.run)
    score = answers["score__score"].to_numpy(dtype=float)
    order = [int(i) for i in np.argsort(-np.nan_to_num(score, nan=-np.inf), kind="stable")]
    near = order[max(0, k - window): k + window]
    wins = np.full(len(frame), np.nan)
    if len(near) > 1:
        row_texts, _ = texts(frame, spec, "state", config.blank)
        wins[near] = await _compare(near, row_texts, criterion, model, own, summary)
        ranked_near = sorted(near, key=lambda i: (-wins[i], order.index(i)))
        order = order[: max(0, k - window)] + ranked_near + order[k + window:]
    chosen = order[:k]
    added = pd.DataFrame({"score": score, "wins": wins}).iloc[chosen]
    added["rank"] = np.arange(1, k + 1)
    out = finish(frame.iloc[chosen], added, config)
    return OperatorFrame.of(out, summary, pd.DataFrame(answers))


async def _compare(near: list[int], row_texts: list[str | None], criterion: str, model: str | None,
                   own: dict[str, Any], summary: OperatorSummary) -> np.ndarray:
    """Every pair of the rows near the cut as a choice "which better meets it", packed as questions of
    as few requests as the question limit allows; each row's expected wins."""
    pairs = [(a, b) for x, a in enumerate(near) for b in near[x + 1:]]
    wins = dict.fromkeys(near, 0.0)
    for start in range(0, len(pairs), MAX_QUESTIONS):
        batch = pairs[start: start + MAX_QUESTIONS]
        questions = {f"c{start + n}": {"type": "choice", "instructions": "Which of the two better meets it?",
                                       "criteria": {"a": str(row_texts[a]), "b": str(row_texts[b])}}
                     for n, (a, b) in enumerate(batch)}
        frame = pd.DataFrame({"criterion": [criterion]})
        answers = await frame.gw.adecide("{criterion}", questions, model=model, **_next_run(own, summary),
                                         join=False)
        summary.add(answers.run)
        for n, (a, b) in enumerate(batch):
            p = float(answers[f"c{start + n}__p__a"].iloc[0])
            if not math.isnan(p):
                wins[a] += p
                wins[b] += 1 - p
    summary.comparisons += len(pairs)
    return np.array([wins[i] for i in near])


# --- aggregate ---------------------------------------------------------------------------------------

MAP_PROMPT = "{instruction}\n\nRows:\n{items}\n\nAnswer:"
REDUCE_PROMPT = ("{instruction}\n\nPartial answers, each over a part of the rows:\n{items}\n\n"
                 "Combine them into one answer:")


@dataclass(frozen=True)
class AggregateSpec:
    """An aggregate's settings beyond the run options, checked once."""

    instruction: str
    max_tokens: int = 256
    max_input_tokens: int | None = None  # None: the model's max_input_tokens in GET /models
    by: Any = None
    text: Any = None
    protocol: str = "chat"
    model: str | None = None

    def __post_init__(self) -> None:
        _check_text(self.instruction, "instruction")
        if self.protocol not in ("chat", "responses", "messages"):
            raise InvalidRequest("protocol", f"a text family: 'chat', 'responses' or 'messages'; got {self.protocol!r}")
        for name in ("max_tokens", "max_input_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidRequest(name, f"must be a positive integer; got {value!r}")


def tokens(text: str) -> int:
    """A text's estimated tokens, as the input-limit check guesses them."""
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)


def pack(items: list[str], room: int) -> list[list[str]]:
    """Consecutive items in chunks whose estimated tokens stay within `room`; an item over it alone is
    the caller's to refuse before this."""
    chunks: list[list[str]] = [[]]
    used = 0
    for item in items:
        size = tokens(f"- {item}\n")
        if chunks[-1] and used + size > room:
            chunks.append([])
            used = 0
        chunks[-1].append(item)
        used += size
    return chunks


def _prompt(spec: AggregateSpec, level: int, chunk: list[str]) -> str:
    template = MAP_PROMPT if level == 0 else REDUCE_PROMPT
    return template.format(instruction=spec.instruction, items="\n".join(f"- {item}" for item in chunk))


async def aggregate(frame: pd.DataFrame, spec: AggregateSpec, options: dict[str, Any]) -> OperatorFrame:
    """One answer per group by map-reduce: chunks that fit the input limit are answered, their answers
    combined level by level until one remains. Every level is a checkpointed text run."""
    own, config = _own_options(options)
    groups = _groups(frame, spec, config)
    room = await _room(spec, own)
    summary = OperatorSummary("aggregate", rows=len(frame))
    items, errors = {}, {}
    for key, group_texts in groups.items():
        too_long = [(label, t) for label, t in group_texts if tokens(f"- {t}\n") > room]
        if too_long:
            errors[key] = _too_long_text(too_long, room)
        else:
            items[key] = [t for _, t in group_texts]
    if errors and config.errors == "raise":
        key, message = next(iter(errors.items()))
        raise InvalidRequest("text", f"group {key!r}: {message} (errors='coerce' makes it an error row)")
    answers, counts = await _map_reduce(spec, items, room, own, summary, errors)
    out = pd.DataFrame({"answer": [answers.get(k) for k in groups], "rows": [len(v) for v in groups.values()],
                        "requests": [counts.get(k, 0) for k in groups],
                        "__error": [errors.get(k) for k in groups]},
                       index=pd.Index(list(groups), name=spec.by if isinstance(spec.by, str) else None))
    return OperatorFrame.of(out.rename(columns=lambda c: f"{config.prefix}{c}"), summary)


def _groups(frame: pd.DataFrame, spec: AggregateSpec, config: RunConfig) -> dict[Any, list[tuple[Any, str]]]:
    """Per group key: (row label, row text); a row that cannot be rendered fails by `errors=`."""
    by = [] if spec.by is None else [spec.by] if isinstance(spec.by, str) else list(spec.by)
    missing = [c for c in by if c not in frame.columns]
    if missing or (spec.by is not None and not by):
        raise InvalidRequest("by", f"unknown column {missing[0] if missing else spec.by!r}")
    default = [c for c in frame.columns if c not in by]
    row_texts, failed = texts(frame, spec.text if spec.text is not None else default, "text", config.blank)
    if failed and config.errors == "raise":
        position, message = min(failed.items())
        raise InvalidRequest("text", f"row {frame.index[position]!r}: {message}")
    # dropna=False: a row whose key is missing is its own group (NaN), never silently dropped
    positions = {"all": np.arange(len(frame))} if not by else frame.groupby(spec.by, sort=False, dropna=False).indices
    return {key: [(frame.index[i], row_texts[i]) for i in where if row_texts[i] is not None]
            for key, where in positions.items()}


async def _room(spec: AggregateSpec, own: dict[str, Any]) -> int:
    """Estimated tokens a chunk's items may take: the input limit's packing share, less the prompt."""
    from gwlab.frames import _client, recipes

    model = recipes.text_recipe(spec.protocol, spec.model, spec.max_tokens, None).model
    limit = spec.max_input_tokens
    if limit is None:
        connection = _client.connection(own.get("gateway"))
        limit = await connection.input_limit(model) if connection.input_limit is not None else None
    if limit is None:
        raise InvalidRequest("max_input_tokens", f"the gateway lists no max_input_tokens for {model!r}: pass "
                                                 "max_input_tokens= so no chunk is cut off")
    overhead = max(tokens(_prompt(spec, level, [])) for level in (0, 1))
    room = int(limit * PACK_SHARE) - overhead
    if room < 1:
        raise InvalidRequest("max_input_tokens", f"{limit} tokens leave no room for rows after the instruction")
    return room


def _too_long_text(rows: list[tuple[Any, str]], room: int) -> str:
    shown = ", ".join(f"{label!r} (~{tokens(t)} tokens)" for label, t in rows[:10])
    return (f"rows longer than the {room} estimated tokens a chunk may hold alone, never cut: {shown}")


async def _map_reduce(spec: AggregateSpec, items: dict[Any, list[str]], room: int, own: dict[str, Any],
                      summary: OperatorSummary, errors: dict[Any, str]) -> tuple[dict[Any, str], dict[Any, int]]:
    """Level by level, every group's chunks in one text run, until each group has one answer."""
    answers: dict[Any, str] = {}
    counts: dict[Any, int] = {}
    level = 0
    while items:
        chunks = {key: pack(values, room) for key, values in items.items()}
        for key, parts in chunks.items():
            if level and len(parts) >= len(items[key]):
                errors[key] = f"level {level}: the partial answers do not fit fewer chunks; raise max_input_tokens"
        rows = [(key, _prompt(spec, level, chunk)) for key, parts in chunks.items() if key not in errors
                for chunk in parts]
        if not rows:
            break
        result = await _text_run(spec, [p for _, p in rows], _next_run(own, summary))
        summary.add(result.run)
        summary.levels = level + 1
        items = {}
        for (key, _), answer, error in zip(rows, result["text"], result["__error"], strict=True):
            counts[key] = counts.get(key, 0) + 1
            if not isinstance(answer, str):
                errors.setdefault(key, f"level {level}: {error or 'not run'}")
            elif key not in errors:
                items.setdefault(key, []).append(answer)
        for key in [k for k, v in items.items() if len(chunks[k]) == 1]:
            answers[key] = items.pop(key)[0]
        level += 1
    return answers, counts


async def _text_run(spec: AggregateSpec, prompts: list[str], own: dict[str, Any]) -> BatchFrame:
    frame = pd.DataFrame({"prompt": prompts})
    if spec.protocol == "responses":
        return await frame.gw.arespond("prompt", model=spec.model, max_tokens=spec.max_tokens, **own, join=False)
    method = frame.gw.achat if spec.protocol == "chat" else frame.gw.amessages
    return await method("prompt", model=spec.model, max_tokens=spec.max_tokens, **own, join=False)


def remaining(budget: Any, spent: OperatorSummary) -> Any:
    """What is left of a token budget after the operator's runs so far, for its next run (a Budget with a
    cost is passed on as it is: each run checks it against its own spend)."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        return max(0, budget - spent.input_tokens - spent.output_tokens)
    return budget


def _next_run(own: dict[str, Any], spent: OperatorSummary) -> dict[str, Any]:
    """The options of the operator's next run: its budget is what the earlier runs left."""
    return {**own, "budget": remaining(own["budget"], spent)} if own.get("budget") is not None else own
