"""`gwlab.estimate`: the share (or mean) of a question's true answer over every row, from every row's model
answer and the rows a person labelled, with an interval that holds whatever the model's errors.

The arguments are `gwlab.evaluate`'s: `truth` names the label column (missing where a row has no
label), `prob` / `pred` the model's answers; labels are read by the one label reader
(`frames/evaluation/labels.py`, through `_targets.resolve`). The statistics are `gwlab/stats/ppi.py`'s:
PPI++ with lam tuned (or fixed: 0 is the labelled-only estimate, 1 plain PPI), cluster-robust with
`cluster=`, and the inverse-probability-weighted form when `label_prob=` names the probability each row
had of being drawn for labelling (the column `label_plan` writes; its labelled-only figure, and lam=0's,
is then the weighted mean of the labels, `hajek_mean`, which stays inside their range). Rows without a
model answer (error rows) are outside the population estimated and counted in `missing`; a label that
matches no option is left out with the reader's warning, its row counted as unlabelled.

What it estimates per answer: noul questions the share answered true; choice questions the share of each
option (with lam tuned per option the shares need not sum to exactly 1; a fixed `lam=` makes them);
score questions the mean level.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning, read_predictions
from gwlab.frames.evaluation.targets import Target, probability_columns, resolve
from gwlab.stats.ppi import MeanEstimate, hajek_mean, ipw_mean, ppi_mean

__all__ = ["estimate"]

_FEW_CLUSTERS = 20  # below this many labelled clusters the clustered normal interval runs short (tests/stats)
# below this many labels with the answer (or without it) a share's interval runs short: ~3 of 60 active
# labels at a 5 % share covered 0.84-0.87 at nominal 0.95; ~10 of 200 covered 0.92-0.94 (bench/ppi_coverage.py)
_FEW_EITHER_WAY = 10


class LabelReading(TypedDict, total=False):
    """How `truth`'s labels are read (frames/evaluation/labels.py), as `evaluate` takes them."""

    questions: Mapping[str, Any] | None
    levels_from: int | None
    labels: Mapping[Any, Any] | None


COLUMNS = ["answer", "rows", "labelled", "missing", "estimate", "low", "high", "labelled_only", "labelled_low",
           "labelled_high", "model_only", "lam", "effective_labels"]


def estimate(frame: pd.DataFrame, truth: str, prob: Any = None, pred: str | None = None, *,
             by: str | None = None, cluster: str | None = None, label_prob: str | None = None,
             lam: float | None = None, level: float = 0.95, **reading: Unpack[LabelReading]) -> pd.DataFrame:
    """Prediction-powered share (or mean) of a question's true answer, per slice of `by`.

    Returns one row per (slice, answer): `estimate` and its [`low`, `high`] interval at `level`; the
    labelled-only estimate and interval (lam = 0) and the model-only figure (the mean model answer, no
    interval: it is biased by the model's errors) beside it; `lam` the weight the model's answers got;
    `effective_labels` how many labels the labelled-only interval would need to be as narrow.

    `reading`: how labels are read, as `evaluate` takes it: `questions=` (the decide() specs),
    `levels_from=` (0 or 1) and `labels=` (synonyms).

    >>> gwlab.estimate(df, truth="label", prob="kind", by="channel")   # doctest: +SKIP
    """
    if not isinstance(truth, str):
        raise InvalidRequest("truth", "estimate reads one label column; give its name")
    for name, value in (("by", by), ("cluster", cluster), ("label_prob", label_prob)):
        if value is not None and value not in frame.columns:
            raise InvalidRequest(name, f"unknown column {value!r}")
    if lam is not None and not 0.0 <= float(lam) <= 1.0:
        raise InvalidRequest("lam", f"a weight in [0, 1] (None: tuned); got {lam!r}")
    target = resolve(frame, truth, prob, pred, reading.get("questions"), reading.get("levels_from"),
                     reading.get("labels"))[0]
    answered, values = _model_answers(frame, target, prob, pred)
    truths = _true_values(target, len(frame))
    answers = ["mean"] if target.kind == "score" else ["true"] if target.kind == "noul" else target.classes
    slices = [(None, np.ones(len(frame), dtype=bool))] if by is None else [
        (key, (frame[by] == key).to_numpy()) for key in sorted(pd.unique(frame[by].dropna()), key=str)]
    rows, thin = [], []
    for key, inside in slices:
        for answer in answers:
            column = 0 if values.shape[1] == 1 else target.classes.index(answer)
            y = truths[:, column]
            rows.append({**({by: key} if by is not None else {}), "answer": answer,
                         **_one(frame, inside, answered, values[:, column], y, cluster, label_prob, lam, level)})
            if target.kind != "score" and _fewest_either_way(y[inside & answered]) < _FEW_EITHER_WAY:
                thin.append(answer if by is None else f"{answer} ({by}={key})")
    if thin:
        warnings.warn(f"{target.question}: fewer than {_FEW_EITHER_WAY} labels with (or without) "
                      f"{', '.join(map(str, thin))}; the interval of such a share runs short (about 0.85 at "
                      "nominal 0.95 with 3 of 60), label more (docs/guide/labels.md)", EvaluationWarning, stacklevel=2)
    table = pd.DataFrame(rows, columns=[*([by] if by is not None else []), *COLUMNS])
    if target.kind != "score":  # a share lies in [0, 1]: clipping the normal interval loses no coverage
        bounds = ["low", "high", "labelled_low", "labelled_high"]
        table[bounds] = table[bounds].clip(0.0, 1.0)
    table.attrs.update(level=level, question=target.question, method="ipw" if label_prob else "ppi++")
    return table


def _model_answers(frame: pd.DataFrame, target: Target, prob: Any, pred: str | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(rows with a model answer, the answer per row and value column): P(class) or 1[pred == class];
    a noul question's one column P(true), a score's one column its expected (or predicted) level."""
    classes = target.classes
    if prob is not None:
        _, _, columns = probability_columns(frame, prob)
        if target.kind == "noul":
            p_true = pd.to_numeric(frame[columns["true"]], errors="coerce").to_numpy(dtype=np.float64)
            proba = np.column_stack([1.0 - p_true, p_true])
        else:
            proba = frame[[columns[c] for c in classes]].apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
        answered = ~np.isnan(proba).any(axis=1)
        proba = np.clip(np.nan_to_num(proba), 0.0, 1.0)
        sums = proba.sum(axis=1, keepdims=True)
        proba = np.divide(proba, sums, out=np.full_like(proba, 1.0 / proba.shape[1]), where=sums > 0)
    else:
        assert pred is not None
        answered = frame[pred].notna().to_numpy()
        index = np.full(len(frame), -1)
        index[answered] = read_predictions(target.question, frame[pred][answered].to_numpy(), target.kind, classes,
                                           column=pred)
        proba = (index[:, None] == np.arange(len(classes))[None, :]).astype(np.float64)
    if target.kind == "score":
        return answered, proba @ np.array([float(c) for c in classes])[:, None]
    return answered, proba[:, [1]] if target.kind == "noul" else proba


def _true_values(target: Target, n_rows: int) -> np.ndarray:
    """Each row's true value per value column (NaN where the row has no readable label)."""
    k = 1 if target.kind in ("noul", "score") else len(target.classes)
    out = np.full((n_rows, k), np.nan)
    if target.kind == "score":
        out[target.positions, 0] = np.array([float(c) for c in target.classes])[target.y]
    elif target.kind == "noul":
        out[target.positions, 0] = (target.y == target.classes.index("true")).astype(np.float64)
    else:
        out[target.positions] = (target.y[:, None] == np.arange(k)[None, :]).astype(np.float64)
    return out


def _one(frame: pd.DataFrame, inside: np.ndarray, answered: np.ndarray, yhat: np.ndarray, y: np.ndarray,
         cluster: str | None, label_prob: str | None, lam: float | None, level: float) -> dict[str, Any]:
    keep = inside & answered
    labelled = keep & ~np.isnan(y)
    if label_prob is not None:
        pi = pd.to_numeric(frame[label_prob], errors="coerce").to_numpy(np.float64)[keep]
        if np.any(~(pi > 0) | (pi > 1)):
            raise InvalidRequest("label_prob", "every row needs its probability of being labelled, in (0, 1]")
        classical = hajek_mean(y[keep], pi, level=level)  # inside the labels' range, unlike lam = 0's form
        best = classical if lam == 0 else ipw_mean(y[keep], yhat[keep], pi, lam=lam, level=level)
    else:
        ids: dict[str, Any] = {}  # ppi_mean's cluster keywords
        if cluster is not None:
            ids = {"clusters": frame[cluster].to_numpy()[labelled],
                   "clusters_unlabelled": frame[cluster].to_numpy()[keep & ~labelled]}
            _warn_few_clusters(ids["clusters"], cluster)
        unlabelled = keep & np.isnan(y)
        best = ppi_mean(y[labelled], yhat[labelled], yhat[unlabelled], lam=lam, level=level, **ids)
        classical = ppi_mean(y[labelled], yhat[labelled], yhat[unlabelled], lam=0.0, level=level, **ids)
    return {"rows": int(keep.sum()), "labelled": int(labelled.sum()), "missing": int((inside & ~answered).sum()),
            "estimate": best.estimate, "low": best.low, "high": best.high, "labelled_only": classical.estimate,
            "labelled_low": classical.low, "labelled_high": classical.high,
            "model_only": float(yhat[keep].mean()) if keep.any() else math.nan, "lam": best.lam,
            "effective_labels": _effective(best, classical)}


def _effective(best: MeanEstimate, classical: MeanEstimate) -> float:
    """Labels the labelled-only estimate would need for the same standard error."""
    if not (best.se > 0 and math.isfinite(classical.se)):
        return math.nan
    return best.n_labelled * (classical.se / best.se) ** 2


def _fewest_either_way(y: np.ndarray) -> int:
    """The smaller of the labels that say yes and those that say no (NaN: unlabelled)."""
    labelled = y[~np.isnan(y)]
    return int(min((labelled == 1.0).sum(), (labelled == 0.0).sum()))


def _warn_few_clusters(clusters: np.ndarray, column: str) -> None:
    count = len(np.unique(clusters))
    if count < _FEW_CLUSTERS:
        warnings.warn(f"cluster={column!r}: only {count} labelled clusters; below {_FEW_CLUSTERS} the clustered "
                      "interval is too short (docs/guide/labels.md)", EvaluationWarning, stacklevel=4)
