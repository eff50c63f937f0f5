"""`gwlab.evaluate`: answer columns scored against labels, as tables a notebook can read and plot.

Definitions (pinned in `stats/metrics.py`): accuracy and macro-F1 of the predicted class (for a score
question the most likely level, `{q}__level`, never the rounded expected level `{q}__score`); Cohen's
kappa between label and prediction; Brier (noul: (p - y)^2 on P(true); choice and score: the
multi-class sum over options); log-loss; ECE over equal-width bins (noul: P(true) against the fraction
true; choice and score: top-label confidence against the fraction right). Rows without a label or
without an answer (error rows) are left out and counted in `n_missing`; rows whose label matches no
option are left out, named in a warning and counted in `n_unmatched` (the matching rules, case, level
text and a 1-based score scale, are in `frames/evaluation/labels.py`). Zero rows left to score is an error.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack, overload

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation import evidence, repeats, tables
from gwlab.frames.evaluation.calibration import Recalibration, recalibrate
from gwlab.frames.evaluation.fields import FieldEvaluation, evaluate_fields
from gwlab.frames.evaluation.labels import EvaluationWarning, LabelMatch, synonyms, synonyms_for
from gwlab.frames.evaluation.targets import Target, resolve
from gwlab.stats import intervals, metrics

__all__ = ["Agreement", "Evaluation", "EvaluationWarning", "FieldEvaluation", "agreement", "evaluate",
           "evaluate_fields", "recalibrate"]

_SUMMED = ("accuracy", "macro_f1", "kappa", "brier", "log_loss", "ece")


@dataclass(frozen=True)
class Evaluation:
    """Every table of one evaluation; `metrics` has one row per question."""

    metrics: pd.DataFrame
    by_type: pd.DataFrame  # n-weighted means of the per-question metrics
    by_option_count: pd.DataFrame
    confusion: dict[str, pd.DataFrame]
    reliability: dict[str, pd.DataFrame]  # per question: the ECE bins (see tables.reliability)
    thresholds: dict[str, pd.DataFrame]  # noul questions: P(true) >= t swept over [0, 1]
    coverage: dict[str, pd.DataFrame]  # accuracy when answering only the most confident rows
    bins: int = 10
    targets: dict[str, Target] = field(default_factory=dict, repr=False)
    labels: dict[str, LabelMatch] = field(default_factory=dict, repr=False)  # how each label column was read
    _source: tuple[pd.DataFrame, dict[str, str], dict[str, Any], Mapping[str, Any] | None, Any] | None = field(
        default=None, repr=False)  # (frame, truths, probs, questions, levels_from)
    level: float = 0.95  # confidence level of the `{metric}_low` / `{metric}_high` columns
    methods: dict[str, str] = field(default_factory=dict)  # metric -> how its interval was computed
    synonyms: Mapping[Any, Any] | None = field(default=None, repr=False)  # the `labels=` given

    def __getitem__(self, question: str) -> pd.Series | pd.DataFrame:
        return self.metrics.loc[question]  # a frame of groups when evaluated with by=

    @property
    def frame(self) -> pd.DataFrame | None:
        """The frame this evaluation scored (None when it kept no reference to it), as `targets` index it."""
        return self._source[0] if self._source is not None else None

    def recalibrate(self, method: str = "temperature", *, fit: float | Any = 0.5,
                    seed: int = 0) -> dict[str, Recalibration]:
        """Fit a calibration map per question with probabilities (see `recalibrate`)."""
        if self._source is None:
            raise InvalidRequest("evaluation", "this evaluation kept no reference to its frame")
        frame, truths, probs, questions, levels_from = self._source
        return {q: recalibrate(self._mapped(frame, q, truths[q]), truths[q], probs[q], method=method, fit=fit,
                               seed=seed, bins=self.bins, questions=questions, levels_from=levels_from)
                for q in truths if q in probs and self.targets[q].proba is not None}

    def _mapped(self, frame: pd.DataFrame, question: str, column: str) -> pd.DataFrame:
        """The frame with `labels=` synonyms applied to a question's label column, as it was scored."""
        mapping = synonyms_for(self.synonyms, question)
        return frame.assign(**{column: synonyms(frame[column], mapping)}) if mapping else frame

    def notes(self) -> list[str]:
        """One line per question whose labels were not read as written: mapped, shifted or unmatched."""
        lines = []
        for question, match in self.labels.items():
            if match.mapped:
                shown = ", ".join(f"{k!r}->{v!r}" for k, v in list(match.mapped.items())[:6])
                lines.append(f"{question}: labels read as options: {shown}")
            if match.shift:
                lines.append(f"{question}: labels on a 1-based scale, shifted by {match.shift}")
            if match.unmatched:
                shown = ", ".join(f"{k!r} ({n})" for k, n in list(match.unmatched.items())[:6])
                lines.append(f"{question}: {match.n_unmatched} rows left out, labels match no option: {shown}")
        return lines

    def __repr__(self) -> str:
        drop = ["n_missing"] + [c for c in ("n_unmatched", "label_shift") if not self.metrics[c].any()]
        shown = evidence.display(self.metrics.drop(columns=drop, errors="ignore"))
        table = shown.to_string(float_format="{:.3f}".format)
        notes = "".join(f"\nnote: {line}" for line in self.notes())
        head = "".join(f"\n{line}" for line in self.headlines())
        return f"Evaluation of {self._questions()} question(s){self._interval_note()}{head}\n{table}{notes}"

    def headlines(self) -> list[str]:
        """Per question whose rows were not all scored: the accuracy beside its n and what was left out, so
        a figure on the matched half is never read as the whole frame's."""
        lines = []
        for question, row in self.metrics.iterrows():
            if isinstance(question, tuple) or not (row["n_missing"] or row["n_unmatched"]):
                continue
            total = int(row["n"] + row["n_missing"] + row["n_unmatched"])
            lines.append(f"{question}: accuracy {row['accuracy']:.3f} on {int(row['n'])} of {total} rows "
                         f"({int(row['n_unmatched'])} left out: label matches no option; "
                         f"{int(row['n_missing'])} left out: no label or no answer)")
        return lines

    def _questions(self) -> int:
        return self.metrics.index.get_level_values(0).nunique()

    def _interval_note(self) -> str:
        if not self.methods:
            return ""
        return f", {self.level:.0%} intervals: accuracy {self.methods['accuracy']}, others {self.methods['kappa']}"

    def _repr_html_(self) -> str:
        head = (f"<b>Evaluation</b> of {self._questions()} question(s), ECE over {self.bins} equal-width bins"
                f"{html.escape(self._interval_note())}")
        parts = [head, *(f"<p><b>{html.escape(line)}</b></p>" for line in self.headlines()),
                 *(f"<p>note: {html.escape(line)}</p>" for line in self.notes()),
                 evidence.display(self.metrics).to_html(float_format="{:.3f}".format, na_rep="–")]
        for question, table in list(self.confusion.items())[:4]:
            parts.append(f"<details><summary>confusion: {html.escape(question)}</summary>{table.to_html()}"
                         "</details>")
        return "\n".join(parts)


class EvaluationSettings(TypedDict, total=False):
    """How finely `evaluate` bins, sweeps and resamples, and which label synonyms it maps (documented in its
    docstring)."""

    bins: int
    steps: int
    resamples: int
    seed: int
    reduce: str | None  # repeats: None pools them, "majority" or "mean" makes one answer per row
    labels: Mapping[Any, Any] | None  # synonyms: {label as written: option}


_SETTINGS = {"bins": 10, "steps": 20, "resamples": intervals.RESAMPLES, "seed": intervals.SEED, "reduce": None}


@overload
def evaluate(frame: pd.DataFrame, truth: str | Mapping[str, str], prob: Any = None, pred: Any = None, *,
             questions: Mapping[str, Any] | None = None, levels_from: int | Mapping[str, int] | None = None,
             by: str | Sequence[str] | None = None, level: float = 0.95, kind: Literal["decisions"] = "decisions",
             **settings: Unpack[EvaluationSettings]) -> Evaluation: ...


@overload
def evaluate(frame: pd.DataFrame, truth: str | Mapping[str, str], prob: Any = None, pred: Any = None, *,
             questions: Mapping[str, Any] | None = None, levels_from: int | Mapping[str, int] | None = None,
             by: str | Sequence[str] | None = None, level: float = 0.95, kind: Literal["fields"],
             **settings: Unpack[EvaluationSettings]) -> FieldEvaluation: ...


def evaluate(frame: pd.DataFrame, truth: str | Mapping[str, str], prob: Any = None, pred: Any = None, *,
             questions: Mapping[str, Any] | None = None, levels_from: int | Mapping[str, int] | None = None,
             by: str | Sequence[str] | None = None, level: float = 0.95, kind: str = "decisions",
             **settings: Unpack[EvaluationSettings]) -> Evaluation | FieldEvaluation:
    """Score answers against labels: accuracy, macro-F1, kappa, Brier, log-loss, ECE, curves.

    Extracted fields (`df.gw.extract`) are scored by ``gwlab.evaluate_fields``, its own function with its
    own result; ``kind="fields"`` here is that call, kept for code written before it (typed: it returns
    a ``FieldEvaluation``, ``kind="decisions"`` an ``Evaluation``).

    Parameters
    ----------
    frame : DataFrame
        Labels and answers side by side, e.g. ``df.join(df.gw.decide(...))`` or the accessor's result.
    truth : str or dict
        The label column; or a dict ``{question id: label column}`` to score several questions at once
        (each found by its tidy columns ``{q}__noul`` / ``{q}__p__*``).
    prob : str, list, dict or None
        Probabilities: a question id, a ``{q}__noul`` column, a list of ``{q}__p__{option}`` columns,
        or ``{option: column}``. With several questions: ``{question id: any of those}``.
    pred : str, dict or None
        Predicted answers (``{q}__choice``) when there are no probabilities: only accuracy,
        macro-F1, kappa and the confusion matrix are computed.
    questions : dict, optional
        The questions as given to ``decide``: score labels may then be written as the level text
        ("very negative"), and a ``pred``-only question knows all its options.
    bins : int, default 10
        Number of equal-width bins over [0, 1] for ECE and the reliability tables.
    steps : int, default 20
        Points of the threshold sweep (``steps + 1``) and the coverage curve.
    levels_from : {0, 1} or dict, optional
        Where numeric score labels start: 0 (labels 0..K-1 are the levels) or 1 (labels 1..K, read as
        level = label - 1); a dict gives it per question id. Not given: read from the labels, with a
        warning when they fit both (e.g. a slice whose labels are 2..4 of a 1..5 rubric), so state it
        to read a frame and any slice of it the same way.
    labels : dict, optional
        Synonyms: ``{label as written: what it means}`` (``{1: False, 2: True, 3: None}`` for a 1/2
        coding with 3 = "unsure"; None leaves the row out as unlabelled), or ``{question id: {...}}``.
        Keys are read by type (the bool True is never the number 1) and text up to case and spaces.
    kind : {"decisions", "fields"}, default "decisions"
        "fields": ``gwlab.evaluate_fields(frame, truth, pred, level=level, labels=labels)`` (see it);
        `prob`, `questions`, `levels_from`, `by` and the other settings do not apply.
    by : str or list of str, optional
        Column(s) of `frame` to slice by: ``metrics`` then has one row per question and slice value,
        with the slice values after the question in its index.
    level : float
        Confidence level of every metric's interval (``{metric}_low``, ``{metric}_high``): Wilson for
        accuracy, a percentile bootstrap over rows for the others (``methods`` names them).
    reduce : {None, "majority", "mean"}
        For a repeats frame (``result.repeats_frame()``, index level ``repeat``): None pools the repeats,
        every (row, repeat) a row and every interval a cluster bootstrap over rows (a row's repeats drawn
        together); "majority" scores each row's most common answer (its vote shares as probabilities),
        "mean" its mean probabilities. See docs/evaluation.md, "Repeats".
    resamples, seed : int
        Bootstrap resamples and their seed (defaults 1,000 and 0: the same call gives the same interval).

    Returns
    -------
    Evaluation
        ``metrics`` (one row per question, or per question and slice), ``by_type``,
        ``by_option_count``, and per question ``confusion``, ``reliability`` (with a Wilson interval
        per bin), ``thresholds`` (noul) and ``coverage`` tables; ``labels`` says per question how the
        labels were read. A question (or slice) with fewer than 10 rows is flagged ``small`` and warned of.

    Raises
    ------
    InvalidRequest
        (field ``truth``) when no row of a question has a label that matches one of its options and
        an answer, when a label matches two options up to case, when a yes/no label is a number other
        than 0 or 1 (a 1/2 coding: map it with ``labels=``; the message names the column and the
        values), or when ``truth={question: ...}`` names a question the frame has no answer columns for.

    Warns
    -----
    EvaluationWarning
        When labels were left out because they match no option (named, with counts), a score's
        labels were read as a 1-based scale and shifted, or fit both scales and ``levels_from`` was
        not given; or when predictions match none of the classes (counted wrong; column and values
        named).

    Examples
    --------
    >>> ev = gwlab.evaluate(df, truth="is_urgent", prob="urgent")        # doctest: +SKIP
    >>> ev.metrics[["accuracy", "ece"]]                                   # doctest: +SKIP
    >>> cal = ev.recalibrate("temperature")["urgent"]                     # doctest: +SKIP
    """
    labels = settings.pop("labels", None)
    rest: dict[str, Any] = dict(settings)
    if kind == "fields":
        return _fields(frame, truth, pred, level, prob=prob, questions=questions, levels_from=levels_from,
                       by=by, labels=labels, **rest)
    if kind != "decisions":
        raise InvalidRequest("kind", f"'decisions' or 'fields'; got {kind!r}")
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    chosen: dict[str, Any] = {**_SETTINGS, **rest}
    bins, steps, resamples, seed, reduce = (chosen[name] for name in _SETTINGS)
    frame, clusters = repeats.prepare(frame, reduce)
    targets = resolve(frame, truth, prob, pred, questions, levels_from, labels)
    rows, confusion, reliability, thresholds, coverage = [], {}, {}, {}, {}
    for t in targets:
        _require_rows(t)
        k = len(t.classes)
        row: dict[str, Any] = {"question": t.question, "type": t.kind, "options": k, "n": len(t.y),
                               "n_missing": t.n_missing, "n_unmatched": t.n_unmatched,
                               "label_shift": t.match.shift if t.match is not None else 0,
                               "accuracy": metrics.accuracy(t.y, t.pred),
                               "macro_f1": metrics.macro_f1(t.y, t.pred, k),
                               "kappa": metrics.cohen_kappa(t.y, t.pred)}
        confusion[t.question] = tables.confusion(t.y, t.pred, t.classes)
        if t.proba is not None:
            table = tables.reliability(t.proba, t.y, t.kind, bins)
            reliability[t.question] = table
            row |= {"brier": metrics.brier(t.proba, t.y, t.kind), "log_loss": metrics.log_loss(t.proba, t.y),
                    "ece": tables.ece(table), "ece_debiased": metrics.ece_debiased(t.proba, t.y, t.kind, bins)}
            coverage[t.question] = tables.coverage_curve(t.confidence, t.correct, steps)
            if t.kind == "noul":
                thresholds[t.question] = tables.threshold_sweep(t.proba, t.y, steps + 1)
        if t.kind == "score" and (t.proba is not None or len(t.y)):
            levels = np.array([float(c) for c in t.classes])
            expected = t.proba @ levels if t.proba is not None else levels[np.clip(t.pred, 0, None)]
            ok = t.y >= 0
            row["mae"] = float(np.mean(np.abs(expected[ok] - levels[t.y[ok]]))) if ok.any() else float("nan")
        rows.append(row)
    table = pd.DataFrame(rows).set_index("question")
    for name in (*_SUMMED, "mae"):
        if name not in table.columns:
            table[name] = np.nan
    if "ece_debiased" not in table.columns:
        table["ece_debiased"] = np.nan
    table = table[["type", "options", "n", "n_missing", "n_unmatched", "label_shift", *_SUMMED, "mae", "ece_debiased"]]
    # intervals (frames/evaluation/evidence.py): added columns, the point estimates above unchanged
    level = intervals.check_level(level)
    table = table.join(evidence.interval_columns(targets, len(frame), level=level, bins=bins,
                                                 resamples=resamples, seed=seed, clusters=clusters))
    reliability = {q: evidence.reliability_intervals(r, level) for q, r in reliability.items()}
    whole = table
    if by is not None:
        # every slice reads score labels on the scale the whole frame was read on (stated or found)
        scales = {t.question: 1 if t.match.shift else 0 for t in targets if t.kind == "score" and t.match is not None}
        table = _sliced(frame, truth, prob, pred, by, [t.question for t in targets], questions=questions,
                        levels_from=levels_from if levels_from is not None else scales or None, labels=labels,
                        bins=bins,
                        level=level, resamples=resamples, seed=seed)
    evidence.warn_small(table)
    source = None
    if isinstance(truth, Mapping):
        probs = dict(prob) if isinstance(prob, Mapping) else {}
        source = (frame, dict(truth), {t.question: probs.get(t.question, t.question) for t in targets},
                  questions, levels_from)
    elif prob is not None:
        source = (frame, {targets[0].question: truth}, {targets[0].question: prob}, questions, levels_from)
    return Evaluation(table, _grouped(whole, "type"), _grouped(whole, "options"), confusion, reliability,
                      thresholds, coverage, bins, {t.question: t for t in targets},
                      {t.question: t.match for t in targets if t.match is not None}, source, level,
                      evidence.methods(resamples, seed, clustered=clusters is not None), labels)


def _fields(frame: pd.DataFrame, truth: Any, pred: Any, level: float, labels: Any = None,
            **unused: Any) -> FieldEvaluation:
    """The kind="fields" evaluation; an option of the decisions path given to it is an error naming it."""
    given = next((name for name, value in unused.items() if value is not None), None)
    if given is not None:
        raise InvalidRequest(given, "does not apply with kind='fields'")
    return evaluate_fields(frame, truth, pred, level=level, labels=labels)


def _sliced(frame: pd.DataFrame, truth: str | Mapping[str, str], prob: Any, pred: Any,
            by: str | Sequence[str], names: list[str], **options: Any) -> pd.DataFrame:
    """The metrics table per question and slice of `by`; a slice where a question has no row has n = 0."""
    keys = [by] if isinstance(by, str) else list(by)
    missing = [k for k in keys if k not in frame.columns]
    if not keys or missing:
        raise InvalidRequest("by", f"slice by column(s) of the frame; unknown: {missing or keys}")
    groups = frame.groupby(keys, dropna=False, sort=True).indices
    parts = []
    for q in names:
        for value, where in groups.items():
            part = frame.iloc[where]
            args = _one_question(q, truth, prob, pred) if isinstance(truth, Mapping) else (truth, prob, pred)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EvaluationWarning)  # said once, for the whole frame
                try:
                    one = evaluate(part, *args, **options).metrics
                except InvalidRequest as error:
                    if "no row to evaluate" not in str(error):
                        raise
                    one = pd.DataFrame({"n": [0], "small": [True]}, index=pd.Index([q], name="question"))
            key = value if isinstance(value, tuple) else (value,)
            parts.append(one.set_index(pd.MultiIndex.from_tuples([(i, *key) for i in one.index],
                                                                 names=["question", *keys])))
    metrics: pd.DataFrame = pd.concat(parts)
    return metrics


def _one_question(q: str, truth: Mapping[str, str], prob: Any, pred: Any) -> tuple[Any, Any, Any]:
    prob_q, pred_q = ({q: m[q]} if isinstance(m, Mapping) and q in m else None for m in (prob, pred))
    return {q: truth[q]}, prob_q, pred_q


def _require_rows(target: Target) -> None:
    """Zero rows to score is an error, not a row of NaN: say which rows were left out and why."""
    if len(target.y):
        return
    raise InvalidRequest("truth", f"question {target.question!r} has no row to evaluate: {target.n_missing} "
                                  f"rows lack a label or an answer, {target.n_unmatched} have a label that "
                                  "matches no option")


def _grouped(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """n-weighted means of each metric over the questions sharing `by` (ECE is not additive: read it
    as a weighted average of per-question ECEs)."""
    out = []
    for key, group in table.groupby(by, sort=True):
        row: dict[str, Any] = {by: key, "questions": len(group), "n": int(group["n"].sum())}
        for name in (*_SUMMED, "mae"):
            values = group[name].astype(float)
            weights = group["n"].where(values.notna(), 0).astype(float)
            row[name] = float((values.fillna(0) * weights).sum() / weights.sum()) if weights.sum() else np.nan
        out.append(row)
    return pd.DataFrame(out).set_index(by) if out else pd.DataFrame()


@dataclass(frozen=True)
class Agreement:
    """How often two answer columns agree, beyond chance (Cohen's kappa), and where they do not."""

    a: str
    b: str
    n: int
    observed: float  # fraction of rows where a == b
    expected: float  # chance agreement from the two marginals
    kappa: float
    table: pd.DataFrame  # crosstab: a's answers as rows, b's as columns
    disagreements: pd.DataFrame = field(repr=False)  # the rows that differ, with both answers

    def __repr__(self) -> str:
        return (f"Agreement({self.a!r} vs {self.b!r}: n={self.n}, agree {self.observed:.1%}, "
                f"kappa {self.kappa:.3f}, {len(self.disagreements)} disagreements)")

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(repr(self))}</p>{self.table.to_html()}"


def agreement(frame: pd.DataFrame, a: str, b: str, *, threshold: float = 0.5) -> Agreement:
    """Cohen's kappa and a disagreement table between two answer columns over rows where both answered.

    Parameters
    ----------
    frame : DataFrame
        Holds both columns (two models, two prompts, a model and a person).
    a, b : str
        Answer columns. ``{q}__noul`` columns are read as ``p >= threshold``; ``{q}__score`` columns
        are rounded to the nearest level; anything else is compared as text.
    threshold : float
        Cut for noul probabilities.

    Returns
    -------
    Agreement
        ``kappa``, ``observed`` and ``expected`` agreement, the crosstab ``table`` and the
        ``disagreements`` rows.
    """
    left, right = (_answers(frame, name, threshold) for name in (a, b))
    both = (left.notna() & right.notna()).to_numpy()
    x, y = left[both].astype(str), right[both].astype(str)
    values = sorted(set(x) | set(y))
    codes = {v: i for i, v in enumerate(values)}
    xi, yi = x.map(codes).to_numpy(), y.map(codes).to_numpy()
    observed = float(np.mean(xi == yi)) if len(xi) else float("nan")
    chance = sum(np.mean(xi == c) * np.mean(yi == c) for c in codes.values())
    expected = float(chance) if len(xi) else float("nan")
    table = pd.crosstab(pd.Categorical(x, values), pd.Categorical(y, values), dropna=False,
                        rownames=[a], colnames=[b])
    differ = (x.to_numpy() != y.to_numpy())
    disagreements = pd.DataFrame({a: x.to_numpy()[differ], b: y.to_numpy()[differ]},
                                 index=frame.index[both][differ])
    kappa = metrics.cohen_kappa(xi, yi)
    return Agreement(a, b, len(xi), observed, expected, kappa, table, disagreements)


def _answers(frame: pd.DataFrame, name: str, threshold: float) -> pd.Series:
    if name not in frame.columns:
        raise InvalidRequest(name, f"unknown column {name!r}")
    column = frame[name]
    if tidy.question_of(name, tidy.NOUL) is not None:
        numbers = pd.to_numeric(column, errors="coerce")
        return numbers.ge(threshold).map({True: "true", False: "false"}).where(numbers.notna())
    if tidy.question_of(name, tidy.SCORE) is not None:
        numbers = pd.to_numeric(column, errors="coerce")
        return numbers.round().astype("Int64").astype(object).where(numbers.notna())
    return column.astype(object).where(column.notna())

