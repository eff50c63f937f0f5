"""Recalibrate a question's probabilities on labelled rows: temperature scaling or isotonic regression.

The local decision engine's raw probabilities are not calibrated (NOTES.md), so a notebook fits a map
on one split of its labelled rows and checks it on the other. Temperature scaling divides the logits
(noul: logit P(true); choice and score: log-probabilities) by one number T that minimises the negative
log-likelihood of the fit split: a bounded 1-D search over log T, no scipy. Isotonic regression fits a
monotone step function by pool-adjacent-violators, one-vs-rest for more than two classes, then
renormalises each row.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation import tables
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.targets import ProbSpec, Target, resolve
from gwlab.stats import metrics

_LOG_T_BOUNDS = (np.log(1e-2), np.log(1e2))
# a fitted log T this close to a bound is stuck there: the best T lies outside the search (T = 100 makes
# every answer nearly uniform, T = 0.01 makes it 0 or 1), so the map is degenerate, never an improvement
_AT_BOUND_LOG_T = 0.05


def temperature_scale(proba: np.ndarray, temperature: float, kind: str) -> np.ndarray:
    """Probabilities with their logits divided by `temperature`."""
    logp = np.log(np.clip(proba, metrics.EPS, 1.0))
    if kind == "noul":  # the 2-class softmax of log p / T is the sigmoid of logit(p) / T
        z = (logp[:, 1] - np.log(np.clip(proba[:, 0], metrics.EPS, 1.0))) / temperature
        p_true = 0.5 * (1.0 + np.tanh(z / 2))  # the sigmoid, without overflow
        return np.column_stack([1.0 - p_true, p_true])
    z = logp / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    scaled: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return scaled


def fit_temperature(proba: np.ndarray, y: np.ndarray, kind: str) -> float:
    """The T in [0.01, 100] minimising NLL: a 60-point grid over log T, then golden section near the best."""

    def nll(log_t: float) -> float:
        return metrics.log_loss(temperature_scale(proba, float(np.exp(log_t)), kind), y)

    grid = np.linspace(*_LOG_T_BOUNDS, 60)
    best = int(np.argmin([nll(g) for g in grid]))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(b)
    return float(np.exp((lo + hi) / 2))


def pav(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators: the non-decreasing fit of `y` on `x`, as interpolation knots (xs, ys).

    Each pooled block contributes its two end points at the block's mean, so `np.interp(new, xs, ys)`
    is constant within a block, linear between blocks and clipped beyond the ends.
    """
    order = np.argsort(x, kind="stable")
    xs, ys = np.asarray(x, float)[order], np.asarray(y, float)[order]
    ws = np.ones_like(ys) if weight is None else np.asarray(weight, float)[order]
    means: list[float] = []
    weights: list[float] = []
    starts: list[int] = []
    for i, (value, w) in enumerate(zip(ys, ws, strict=True)):
        means.append(value)
        weights.append(w)
        starts.append(i)
        while len(means) > 1 and means[-2] > means[-1]:  # a violation: pool the last two blocks
            w2 = weights[-2] + weights[-1]
            means[-2] = (means[-2] * weights[-2] + means[-1] * weights[-1]) / w2
            weights[-2] = w2
            del means[-1], weights[-1], starts[-1]
    ends = [*starts[1:], len(xs)]
    knots_x, knots_y = [], []
    for mean, start, end in zip(means, starts, ends, strict=True):
        knots_x += [xs[start], xs[end - 1]]
        knots_y += [mean, mean]
    return np.array(knots_x), np.array(knots_y)


def isotonic(fit_proba: np.ndarray, fit_y: np.ndarray, proba: np.ndarray, kind: str) -> np.ndarray:
    """Isotonic map fitted on (fit_proba, fit_y), applied to `proba`."""
    if kind == "noul":
        xs, ys = pav(fit_proba[:, 1], (fit_y == 1).astype(float))
        p_true = np.interp(proba[:, 1], xs, ys)
        return np.column_stack([1.0 - p_true, p_true])
    out = np.empty_like(proba)
    for k in range(proba.shape[1]):
        xs, ys = pav(fit_proba[:, k], (fit_y == k).astype(float))
        out[:, k] = np.interp(proba[:, k], xs, ys)
    sums = out.sum(axis=1, keepdims=True)
    fitted: np.ndarray = np.divide(out, sums, out=np.full_like(out, 1.0 / out.shape[1]), where=sums > 0)
    return fitted


@dataclass(frozen=True)
class Recalibration:
    """A fitted map for one question, with its effect measured on the held-out rows."""

    question: str
    kind: str
    method: str
    temperature: float | None
    n_fit: int
    n_test: int
    nll_before: float  # on the held-out rows
    nll_after: float
    ece_before: float
    ece_after: float
    columns: pd.DataFrame = field(repr=False)  # calibrated probability columns, aligned on the frame
    _fit: tuple[np.ndarray, np.ndarray] = field(repr=False, default=(np.zeros((0, 2)), np.zeros(0)))
    _class_columns: Mapping[str, str] = field(repr=False, default_factory=dict)

    def apply(self, proba: np.ndarray) -> np.ndarray:
        """This map applied to an n x K probability matrix in the question's class order."""
        if self.method == "temperature":
            assert self.temperature is not None
            return temperature_scale(proba, self.temperature, self.kind)
        return isotonic(*self._fit, proba, self.kind)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A copy of `frame` with this question's probability columns calibrated, and every column derived
        from them said again: the answer, the expected level, the most likely level and the confidence."""
        out = frame.copy()
        cols = dict(self._class_columns)
        given = out[list(cols.values())].apply(pd.to_numeric, errors="coerce")
        ok = given.notna().all(axis=1).to_numpy()
        if self.kind == "noul":
            p_true = given.iloc[:, 0].to_numpy(float)[ok]
            proba = np.column_stack([1.0 - p_true, p_true])
        else:
            proba = given.to_numpy(float)[ok]
        calibrated = self.apply(proba) if len(proba) else proba
        for i, col in enumerate(cols.values()):
            values = out[col].to_numpy(float, copy=True, na_value=np.nan)
            values[ok] = calibrated[:, 1 if self.kind == "noul" else i]
            out[col] = values
        if self.kind in ("choice", "score") and len(calibrated):
            for column, values in self._derived(calibrated, list(cols)).items():
                if column in out.columns:
                    _set_rows(out, column, ok, values)
        return out

    def _derived(self, calibrated: np.ndarray, classes: list[str]) -> dict[str, Any]:
        """The columns `decide` derives from a choice or score question's probabilities, per kept row."""
        q = self.question
        top = calibrated.argmax(axis=1)
        derived: dict[str, Any] = {tidy.column(q, tidy.CONFIDENCE): metrics.confidence(calibrated)}
        if self.kind == "choice":
            derived[tidy.column(q, tidy.CHOICE)] = [classes[j] for j in top]
        else:
            levels = np.array([float(c) for c in classes])
            derived[tidy.column(q, tidy.SCORE)] = calibrated @ levels
            derived[tidy.column(q, tidy.LEVEL)] = [int(level) for level in levels[top]]
        return derived

    @property
    def at_bound(self) -> bool:
        """A temperature fit stuck at its search bound (0.01 or 100): degenerate, whatever the metrics say
        (T = 100 flattens every answer to near-uniform, which can lower ECE while saying nothing)."""
        if self.temperature is None:
            return False
        log_t = np.log(self.temperature)
        return bool(min(abs(log_t - bound) for bound in _LOG_T_BOUNDS) < _AT_BOUND_LOG_T)

    @property
    def helped(self) -> bool:
        """Whether the map improved the held-out rows: ECE lower and NLL no higher than before, and not a
        temperature stuck at its search bound."""
        return bool(not self.at_bound and self.ece_after < self.ece_before and self.nll_after <= self.nll_before)

    def verdict(self) -> str:
        """'' when the map helped; else what got worse on the held-out rows, and what to do instead."""
        if self.helped:
            return ""
        worse = []
        if self.ece_after >= self.ece_before:
            worse.append(f"ECE {self.ece_before:.3f} -> {self.ece_after:.3f}")
        if self.nll_after > self.nll_before:
            worse.append(f"NLL {self.nll_before:.3f} -> {self.nll_after:.3f}")
        if self.at_bound:
            assert self.temperature is not None
            effect = "flattens every answer to near-uniform" if self.temperature > 1 else "makes every answer 0 or 1"
            worse.append(f"the fit is stuck at its search bound T={self.temperature:.3g}, so the map {effect}")
        return (f"did not help on the {self.n_test} held-out rows ({'; '.join(worse)}): keep the raw "
                "probabilities, or fit on more rows")

    def __repr__(self) -> str:
        t = f", T={self.temperature:.3g}" if self.temperature is not None else ""
        verdict = f"; {self.verdict().upper()}" if not self.helped else ""
        return (f"Recalibration({self.question!r}, {self.method}{t}: held-out NLL {self.nll_before:.4f} -> "
                f"{self.nll_after:.4f}, ECE {self.ece_before:.4f} -> {self.ece_after:.4f}, "
                f"fit on {self.n_fit}, tested on {self.n_test}{verdict})")

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(repr(self))}</pre>"


def _set_rows(frame: pd.DataFrame, column: str, rows: np.ndarray, values: Any) -> None:
    """Overwrite `column` on the rows of the boolean mask `rows`, keeping the column's kind."""
    column_values = frame[column].to_numpy(dtype=object, copy=True)
    column_values[rows] = list(values)
    series = pd.Series(column_values, index=frame.index)
    try:
        frame[column] = series.astype(frame[column].dtype)
    except (TypeError, ValueError):
        frame[column] = series.infer_objects()


def recalibrate(frame: pd.DataFrame, truth: str, prob: ProbSpec, *, method: str = "temperature",
                fit: float | Any = 0.5, seed: int = 0, bins: int = 10,
                questions: Mapping[str, Any] | None = None,
                levels_from: int | Mapping[str, int] | None = None) -> Recalibration:
    """Fit a calibration map for one question on part of the labelled rows; measure it on the rest.

    Parameters
    ----------
    frame : DataFrame
        Rows with a label column and the question's probability columns.
    truth : str
        The label column.
    prob : str, list of str or dict
        A question id (finds ``{q}__noul`` or ``{q}__p__*``), or the probability columns.
    method : {"temperature", "isotonic"}
        Temperature scaling (one parameter, hard to overfit) or isotonic regression (flexible,
        needs more rows).
    fit : float or boolean mask
        Fraction of labelled rows to fit on (chosen at random with `seed`), or a boolean mask over
        `frame` marking the fit rows; the other labelled rows are the held-out test.
    seed : int
        Seed of the random split.
    bins : int
        Equal-width bins for the ECE reported before and after.
    questions : dict, optional
        The questions as given to ``decide``, so labels are read as `gwlab.evaluate` reads them.
    levels_from : {0, 1} or dict, optional
        Where numeric score labels start, as for `gwlab.evaluate`.

    Returns
    -------
    Recalibration
        The fitted map: ``.columns`` holds calibrated probabilities for every row of `frame`,
        ``.transform(df)`` applies it to any frame, and the held-out NLL/ECE before and after.
    """
    if method not in ("temperature", "isotonic"):
        raise InvalidRequest("method", f"must be 'temperature' or 'isotonic'; got {method!r}")
    (target,) = resolve(frame, truth, prob, questions=questions, levels_from=levels_from)
    if target.proba is None or (target.kind == "noul" and not target.columns):
        raise InvalidRequest("prob", "recalibration needs probability columns")
    is_fit = _split(frame, target, fit, seed)
    if is_fit.sum() < 2 or (~is_fit).sum() < 1:
        raise InvalidRequest("fit", f"needs at least 2 fit rows and 1 test row; got {is_fit.sum()} and "
                                    f"{(~is_fit).sum()} labelled rows")
    proba, y = target.proba, target.y
    temperature = None
    fitted = (proba[is_fit], y[is_fit])
    if method == "temperature":
        temperature = fit_temperature(proba[is_fit], y[is_fit], target.kind)
        after = temperature_scale(proba[~is_fit], temperature, target.kind)
    else:
        after = isotonic(*fitted, proba[~is_fit], target.kind)
    before = proba[~is_fit]
    kind = target.kind
    result = Recalibration(
        target.question, kind, method, temperature, int(is_fit.sum()), int((~is_fit).sum()),
        metrics.log_loss(before, y[~is_fit]), metrics.log_loss(after, y[~is_fit]),
        tables.ece(tables.reliability(before, y[~is_fit], kind, bins)),
        tables.ece(tables.reliability(after, y[~is_fit], kind, bins)),
        pd.DataFrame(index=frame.index), fitted, dict(target.columns))
    calibrated = result.transform(frame)[list(target.columns.values())]
    object.__setattr__(result, "columns", calibrated)
    if not result.helped:
        warnings.warn(f"{method} recalibration of {target.question!r} {result.verdict()}", EvaluationWarning,
                      stacklevel=2)
    return result


def _split(frame: pd.DataFrame, target: Target, fit: float | Any, seed: int) -> np.ndarray:
    """Fit mask over the target's kept rows."""
    if isinstance(fit, float | int) and not isinstance(fit, bool):
        if not 0 < fit < 1:
            raise InvalidRequest("fit", f"a fraction must be between 0 and 1; got {fit}")
        n = len(target.y)
        mask = np.zeros(n, dtype=bool)
        mask[np.random.default_rng(seed).permutation(n)[: max(1, round(fit * n))]] = True
        return mask
    mask = np.asarray(fit.to_numpy() if isinstance(fit, pd.Series) else fit, dtype=bool)
    if mask.shape != (len(frame),):
        raise InvalidRequest("fit", f"a mask needs one boolean per row ({len(frame)}); got {mask.shape}")
    fit_rows: np.ndarray = mask[target.positions]
    return fit_rows
