"""`gwlab.compare`: two sets of answers on the same rows, paired by index: is B better than A, by how much?

Each metric's difference (B - A) gets a paired percentile bootstrap interval: one set of row resamples
serves both sides, so what the two share (the same hard rows) cancels. Accuracy's p-value is the exact
McNemar test (a two-sided binomial test on the rows exactly one side got right); every other metric's
is the paired bootstrap's: the share of resampled differences at least as far from the observed one as
the observed one is from zero. p-values are Holm-adjusted across every (question, metric) row of the
table, since the verdict names any of them that is significant: the chance that an A/A comparison gets
a verdict naming any difference stays at 1 - level (tests/frames/test_compare_level.py simulates it).
Labels and predictions are read as `gwlab.evaluate` reads them (frames/labels.py), with its warnings.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack, overload

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation import evidence, repeats
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.sequential_compare import Sequential, SequentialComparison, run_sequential
from gwlab.frames.evaluation.targets import Target, resolve
from gwlab.frames.run.records import run_answers
from gwlab.stats import intervals

__all__ = ["Comparison", "compare"]

_LOWER_IS_BETTER = frozenset({"brier", "log_loss", "ece", "mae"})
_TRUTH = "__truth__"


@dataclass(frozen=True)
class Comparison:
    """B against A on the rows both answered: differences with intervals, tests, flips and a verdict."""

    table: pd.DataFrame  # one row per (question, metric): a, b, diff, diff_low, diff_high, p_value, p_adjusted
    flips: pd.DataFrame  # rows one side got right and the other wrong, indexed by row id
    only_a: pd.Index  # rows of `a` that `b` lacks: not compared
    only_b: pd.Index
    level: float
    verdict: str

    def __repr__(self) -> str:
        shown = self.table.drop(columns=["method"]).to_string(float_format="{:.3f}".format)
        return f"Comparison (B - A, {self.level:.0%} intervals)\n{shown}\n{self.verdict}"

    def _repr_html_(self) -> str:
        verdict = "".join(f"<p>{html.escape(line)}</p>" for line in self.verdict.splitlines())
        return f"{verdict}{self.table.to_html(float_format='{:.3f}'.format, na_rep='–')}"


class CompareSettings(TypedDict, total=False):
    """How finely `compare` bins and resamples (documented in its docstring)."""

    bins: int
    resamples: int
    seed: int


_SETTINGS = {"bins": 10, "resamples": intervals.RESAMPLES, "seed": intervals.SEED}


@overload
def compare(a: Any, b: Any, truth: Any, *, level: float = ..., questions: Mapping[str, Any] | None = ...,
            reduce: str | None = ..., levels_from: int | Mapping[str, int] | None = ...,
            labels: Mapping[Any, Any] | None = ..., sequential: None = ...,
            **settings: Unpack[CompareSettings]) -> Comparison: ...
@overload
def compare(a: Any, b: Any, truth: Any, *, level: float = ..., questions: Mapping[str, Any] | None = ...,
            reduce: str | None = ..., levels_from: int | Mapping[str, int] | None = ...,
            labels: Mapping[Any, Any] | None = ..., sequential: Sequential,
            **settings: Unpack[CompareSettings]) -> SequentialComparison: ...
def compare(a: Any, b: Any, truth: Any, *, level: float = 0.95,
            questions: Mapping[str, Any] | None = None, reduce: str | None = None,
            levels_from: int | Mapping[str, int] | None = None, labels: Mapping[Any, Any] | None = None,
            sequential: Sequential | None = None,
            **settings: Unpack[CompareSettings]) -> Comparison | SequentialComparison:
    """Compare two sets of answers to the same rows (two models, prompts, gateways, a run and its baseline).

    Parameters
    ----------
    a, b : DataFrame, Series or str
        Answers indexed by row id: result frames of ``df.gw.decide`` (``{q}__noul``, ``{q}__p__*``,
        ``{q}__choice``, ``{q}__score`` columns), one Series of predicted answers each, or a recorded
        run's id (``result.run.run_id``, a row of `gwlab.runs`), whose answers are read from the default
        checkpoint store by `gwlab.run_answers` without sending anything.
    truth : Series, DataFrame, str or dict
        The labels: a Series indexed like the answers (one question), a DataFrame of labels whose columns
        are question ids (every question of `a` it names is compared), the name of a label column of `a`
        (or `b`), or ``{question id: Series or column name}`` for several questions. A run's answers hold
        no input columns: with run ids give the labels as a Series or a frame.
    level : float
        Confidence level of the intervals; a difference is called significant when its p-value,
        Holm-adjusted across every question and metric of the table, is below ``1 - level``.
    questions : dict, optional
        The questions as given to ``decide``, so labels are read as `gwlab.evaluate` reads them.
    bins, resamples, seed : int
        ECE bins; bootstrap resamples (1,000) and their seed (0).
    reduce : {None, "majority", "mean"}
        For two repeats frames (``result.repeats_frame()``): None pairs them by (row, repeat) and
        resamples rows with all their repeats (a paired cluster bootstrap, also for accuracy's p-value);
        "majority" or "mean" reduces each side to one answer per row first, as in `gwlab.evaluate`.
    levels_from : {0, 1} or dict, optional
        Where numeric score labels start, as in `gwlab.evaluate` (not given: read from the labels, with
        its warning when they fit both scales).
    labels : dict, optional
        Label synonyms, as in `gwlab.evaluate` (``{1: False, 2: True}``, or ``{question id: {...}}``).
    sequential : Sequential, optional
        Send rows in rounds and stop paying once accuracy(B) - accuracy(A) is resolved: `a` and `b` are
        then functions answering a chunk of ``sequential.rows`` (a Series of answers indexed like it),
        `truth` a label column of those rows (or a Series indexed like them); the anytime-valid confidence
        sequence at ``1 - level`` decides, as in `gwlab.compare_sequential`. Accuracy only.

    Returns
    -------
    Comparison or SequentialComparison
        ``table`` (one row per question and metric), ``flips`` (right->wrong, wrong->right rows),
        ``only_a``/``only_b`` (rows one side lacks, reported and warned of) and a ``verdict``; with
        `sequential`, where the rounds stopped (``rows``, ``low``, ``high``, ``decision``, ``trace``).

    Examples
    --------
    >>> gwlab.compare(run_a, run_b, truth=labels["urgent"]).verdict          # doctest: +SKIP
    >>> gwlab.compare(answer_a, answer_b, "label", sequential=gwlab.Sequential(df, budget=2000))  # doctest: +SKIP
    """
    level = intervals.check_level(level)
    if sequential is not None:
        return run_sequential(a, b, truth, sequential, alpha=1.0 - level)
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    chosen: dict[str, Any] = {**_SETTINGS, **settings}
    bins, resamples, seed = (chosen[name] for name in _SETTINGS)
    (a_frame, pooled_a), (b_frame, pooled_b) = (repeats.prepare(_frame(_answers_of(side), name), reduce)
                                                for side, name in ((a, "a"), (b, "b")))
    if (pooled_a is None) != (pooled_b is None):
        raise InvalidRequest("reduce", "one side is a repeats frame and the other is not: pass reduce= "
                                       "('majority' or 'mean') to compare one answer per row")
    truths, synonyms = _labels(truth, a_frame, b_frame), labels
    common = a_frame.index[a_frame.index.isin(b_frame.index)]
    only_a, only_b = a_frame.index.difference(b_frame.index), b_frame.index.difference(a_frame.index)
    if len(only_a) or len(only_b):
        warnings.warn(f"rows in one side only are not compared: {len(only_a)} only in a, {len(only_b)} only in "
                      "b (see .only_a, .only_b)", EvaluationWarning, stacklevel=2)
    read = {"questions": questions, "levels_from": levels_from, "labels": synonyms}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", EvaluationWarning)
        pairs = [_paired(*(_target(side.loc[common], label, q, name, read)
                           for side, name in ((a_frame, "a"), (b_frame, "b"))))
                 for q, label in truths.items()]
    _say_once(said)
    clusters = None if pooled_a is None else pd.factorize(common.droplevel(repeats.REPEAT))[0].astype(np.intp)  # type: ignore[arg-type]  # pandas-stubs: Index.droplevel's level typed Sequence[Never]
    table = pd.DataFrame(_rows(pairs, len(common), level, bins, resamples, seed, clusters)
                         ).set_index(["question", "metric"])
    table["p_adjusted"] = adjusted(table["p_value"].to_numpy())
    table = table[["n", "a", "b", "diff", "diff_low", "diff_high", "p_value", "p_adjusted", "method"]]
    flips = pd.concat([_flips(ta, tb) for ta, tb in pairs])
    return Comparison(table, flips, only_a, only_b, level, _verdict(table, level, only_a, only_b))


def adjusted(p: np.ndarray) -> np.ndarray:
    """Holm over every p-value the verdict may name (all questions and metrics): its family-wise level."""
    return intervals.holm(p)


def _say_once(said: list[warnings.WarningMessage]) -> None:
    """Re-issue the label reader's warnings, each once (both sides read the same labels)."""
    seen: set[str] = set()
    for w in said:
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            warnings.warn(text, w.category, stacklevel=3)


def _answers_of(side: Any) -> Any:
    """A run id (a string) is that recorded run's answers, read from the default store (`run_answers`)."""
    return run_answers(side) if isinstance(side, str) else side


def _frame(side: Any, name: str) -> pd.DataFrame:
    """A side's answers as a frame; a Series is one question's predicted answers, named after it."""
    if isinstance(side, pd.Series):
        side = side.to_frame(tidy.column(str(side.name or "answer"), tidy.CHOICE))
    if not isinstance(side, pd.DataFrame):
        raise InvalidRequest(name, f"must be a DataFrame of answers or a Series of predictions; got "
                                   f"{type(side).__name__}")
    if side.index.has_duplicates:
        raise InvalidRequest(name, "the index must identify rows (it is what pairs a and b); it has duplicates")
    return side


def _question_ids(frame: pd.DataFrame) -> list[str]:
    found: dict[str, None] = {}
    for column in map(str, frame.columns):
        question = (tidy.split_probability(column)[0] if tidy.is_probability(column)
                    else tidy.question_of(column, tidy.NOUL, tidy.CHOICE, tidy.SCORE))
        if question is not None:
            found[question] = None
    return list(found)


def _labels(truth: Any, a: pd.DataFrame, b: pd.DataFrame) -> dict[str, pd.Series]:
    """question id -> label Series, from a Series, a column name or a dict of either."""
    def series(value: Any) -> pd.Series:
        if isinstance(value, pd.Series):
            return value
        for side in (a, b):
            if isinstance(value, str) and value in side.columns:
                return side[value]
        raise InvalidRequest("truth", f"a label Series or a column of a or b; got {value!r}")

    if isinstance(truth, pd.DataFrame):  # a label frame: its columns named after the questions compared
        asked = [q for q in _question_ids(a) if q in truth.columns]
        if not asked:
            raise InvalidRequest("truth", f"a label frame needs a column named after a question of the answers "
                                          f"({_question_ids(a)}); it has {list(truth.columns)}")
        return {q: truth[q] for q in asked}
    if isinstance(truth, Mapping):
        if not truth:
            raise InvalidRequest("truth", "name at least one question")
        return {str(q): series(v) for q, v in truth.items()}
    found = _question_ids(a)
    if len(found) != 1:
        raise InvalidRequest("truth", f"the answers hold {len(found)} questions ({found}); give "
                                      "truth={question id: labels} to say which to compare")
    return {found[0]: series(truth)}


def _target(side: pd.DataFrame, label: pd.Series, q: str, name: str, read: Mapping[str, Any]) -> Target:
    """One side's question, read as `gwlab.evaluate` reads it (probabilities when it has them)."""
    rows = side.index  # a repeats frame's rows take the label of their row id
    if repeats.REPEAT in (rows.names or []) and repeats.REPEAT not in (label.index.names or []):
        rows = rows.droplevel(repeats.REPEAT)  # type: ignore[arg-type]  # pandas-stubs: level typed Sequence[Never]
    column = str(label.name) if label.name is not None and label.name not in side.columns else _TRUTH
    frame = side.assign(**{column: label.reindex(rows).to_numpy()})
    has_prob = tidy.column(q, tidy.NOUL) in side.columns or bool(tidy.options_of(q, side.columns))
    pred = next((tidy.column(q, kind) for kind in (tidy.CHOICE, tidy.SCORE) if tidy.column(q, kind) in side.columns),
                None)
    if not has_prob and pred is None:
        raise InvalidRequest(name, f"no answer columns for question {q!r} ({q}__noul, {q}__p__*, {q}__choice "
                                   f"or {q}__score)")
    (target,) = resolve(frame, {q: column}, {q: q} if has_prob else {}, {} if has_prob else {q: pred},
                        read["questions"], read["levels_from"], read["labels"])
    return target


def _paired(ta: Target, tb: Target) -> tuple[Target, Target]:
    """Both targets kept to the rows both answered with a matched label."""
    both = np.intersect1d(ta.positions, tb.positions)
    if not len(both):
        raise InvalidRequest("truth", f"question {ta.question!r}: no row has a label and an answer on both sides")
    return _keep(ta, both), _keep(tb, both)


def _keep(t: Target, positions: np.ndarray) -> Target:
    at = np.searchsorted(t.positions, positions)
    return replace(t, index=t.index[at], positions=positions, y=t.y[at], pred=t.pred[at],
                   proba=None if t.proba is None else t.proba[at])


def _rows(pairs: list[tuple[Target, Target]], n_rows: int, level: float, bins: int, resamples: int,
          seed: int, clusters: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Every question's rows of the table; one set of row resamples shared by all questions and both sides.

    With `clusters` (repeats pooled: each (row, repeat) a row, clustered by row) the resamples draw
    rows with all their repeats, and the confusion counts are one-hot columns summed with those weights.
    """
    sums = [(evidence.target_sums(ta, bins), evidence.target_sums(tb, bins)) for ta, tb in pairs]
    blocks = [s.columns if clusters is None else np.hstack([s.columns, np.eye(s.n_cells)[s.cells]])
              for pair in sums for s in pair]
    widths = np.cumsum([0, *(b.shape[1] for b in blocks)])
    columns = np.zeros((n_rows, widths[-1]))
    for i, (ta, _) in enumerate(pairs):
        for j in range(2):
            columns[ta.positions, widths[2 * i + j]:widths[2 * i + j + 1]] = blocks[2 * i + j]
    resampled = intervals.bootstrap_sums(columns, resamples, seed, clusters)
    rows = []
    for i, ((ta, tb), (sa, sb)) in enumerate(zip(pairs, sums, strict=True)):
        parts = [resampled[:, widths[2 * i + j]:widths[2 * i + j + 1]] for j in range(2)]
        if clusters is None:
            counts = intervals.bootstrap_counts([sa, sb], resamples, seed)
        else:
            width = (sa.columns.shape[1], sb.columns.shape[1])
            counts = [part[:, w:] for part, w in zip(parts, width, strict=True)]
            parts = [part[:, :w] for part, w in zip(parts, width, strict=True)]
        rows += _question_rows(ta, tb, (sa, sb), (parts[0], parts[1]), (counts[0], counts[1]), level,
                               clustered=clusters is not None)
    return rows


def _question_rows(ta: Target, tb: Target, sums: tuple[intervals.RowSums, intervals.RowSums],
                   resampled: tuple[np.ndarray, np.ndarray], counts: tuple[np.ndarray, np.ndarray], level: float,
                   clustered: bool = False) -> list[dict[str, Any]]:
    """One row per metric both sides have: values, paired bootstrap interval of B - A, p-value."""
    sa, sb = sums
    point_a, point_b = sa.point(), sb.point()
    boot_a, boot_b = sa.metrics(counts[0], resampled[0]), sb.metrics(counts[1], resampled[1])
    right_a, right_b = ta.y == ta.pred, tb.y == tb.pred
    rows = []
    for m in evidence.METRICS:
        if m not in point_a or m not in point_b:
            continue
        diff = float(point_b[m] - point_a[m])
        resampled_diff = boot_b[m] - boot_a[m]
        low, high = intervals.percentile(resampled_diff, level)
        if clustered:  # McNemar counts each repeat as an independent pair; the rows are the units
            p, method = _bootstrap_p(resampled_diff, diff), "paired cluster bootstrap (repeats pooled)"
        elif m == "accuracy":
            p = intervals.mcnemar_exact(int(np.sum(right_a & ~right_b)), int(np.sum(~right_a & right_b)))
            method = "McNemar exact; paired bootstrap interval"
        else:
            p = _bootstrap_p(resampled_diff, diff)
            method = "paired bootstrap"
        rows.append({"question": ta.question, "metric": m, "n": len(ta.y), "a": point_a[m],
                     "b": point_b[m], "diff": diff, "diff_low": low, "diff_high": high, "p_value": p,
                     "method": method})
    return rows


def _bootstrap_p(resampled: np.ndarray, diff: float) -> float:
    """Two-sided: resampled differences, centred on the observed one, at least as far out as it is from 0."""
    finite = resampled[~np.isnan(resampled)]
    if diff != diff or not len(finite):
        return float("nan")
    return float((1 + np.sum(np.abs(finite - diff) >= abs(diff))) / (len(finite) + 1))


def _flips(ta: Target, tb: Target) -> pd.DataFrame:
    right_a, right_b = ta.y == ta.pred, tb.y == tb.pred
    changed = right_a != right_b
    return pd.DataFrame({
        "question": ta.question,
        "truth": _names(ta, ta.y[changed]),
        "a": _names(ta, ta.pred[changed]),
        "b": _names(tb, tb.pred[changed]),
        "change": np.where(right_a[changed], "right→wrong", "wrong→right"),
    }, index=ta.index[changed])


def _names(t: Target, index: np.ndarray) -> np.ndarray:
    """Class names of class indices; -1 (a prediction outside the question's classes) is None."""
    return np.array([*t.classes, None], dtype=object)[np.where(index >= 0, index, len(t.classes))]


def _verdict(table: pd.DataFrame, level: float, only_a: pd.Index, only_b: pd.Index) -> str:
    """Plain language; a difference is called only when its Holm-adjusted p-value is below 1 - level."""
    alpha = 1 - level
    lines = []
    for q, rows in table.groupby(level="question", sort=False):
        acc = rows.xs("accuracy", level="metric").iloc[0]
        n = int(acc["n"])
        shown = (f"accuracy {acc['a']:.3f} -> {acc['b']:.3f}, diff {acc['diff']:+.3f} "
                 f"[{acc['diff_low']:+.3f}, {acc['diff_high']:+.3f}], McNemar p {acc['p_value']:.3g}, "
                 f"Holm {acc['p_adjusted']:.3g}, n={n}")
        if acc["p_adjusted"] < alpha:
            better = "B" if acc["diff"] > 0 else "A"
            line = f"{q}: {better} is more accurate ({shown})"
        else:
            line = f"{q}: no significant difference in accuracy, neither is shown better ({shown})"
        if n < intervals.MIN_ROWS:
            line += f"; only {n} paired rows: read nothing into it"
        called = [f"{m} favours {_better(str(m), r['diff'])}" for m, r in rows.droplevel(["question"]).iterrows()
                  if m != "accuracy" and r["p_adjusted"] < alpha]
        if called:
            line += "; significant: " + ", ".join(called)
        lines.append(line)
    if len(only_a) or len(only_b):
        lines.append(f"not compared: {len(only_a)} rows only in a, {len(only_b)} only in b")
    return "\n".join(lines)


def _better(metric: str, diff: float) -> str:
    return "A" if (diff > 0) == (metric in _LOWER_IS_BETTER) else "B"
