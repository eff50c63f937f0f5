"""`df.gw.decide(..., cascade=...)`: the cheap model's run, the oracle's sample, the threshold, the rest.

Every model call is an ordinary `df.gw.decide` run on a slice of the frame, so checkpoints, errors and
the request log behave as everywhere else, and a resumed cascade pays nothing twice (its sample is seeded
and the proxy's answers are checkpointed, so the same rows reach the oracle again, from the checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames.budget import Budget
from gwlab.frames.cascade import Cascade, Threshold, choose_threshold, proxy_answers, sample_rows
from gwlab.frames.intervals import clopper_pearson
from gwlab.frames.result import BatchFrame

__all__ = ["run_cascade"]


@dataclass(frozen=True)
class _Question:
    """The cascaded question: its id, type and the columns its answer and confidence are read from."""

    name: str
    kind: str

    @classmethod
    def of(cls, questions: Mapping[str, Any], cascade: Cascade) -> _Question:
        name = cascade.question if cascade.question is not None else _only(questions)
        if name not in questions:
            raise InvalidRequest("question", f"{name!r} is not one of the run's questions ({', '.join(questions)})")
        kind = questions[name].get("type") if isinstance(questions[name], Mapping) else None
        if cascade.metric != "accuracy" and kind != "noul":
            raise InvalidRequest("metric", f"{cascade.metric!r} needs a noul question; {name!r} is {kind!r}")
        return cls(name, str(kind))

    def answers(self, frame: pd.DataFrame) -> np.ndarray:
        """The model's answer per row: True/False (noul), the option (choice), the level (score)."""
        column = {"noul": "__noul", "choice": "__choice"}.get(self.kind, "__level")
        values = frame[f"{self.name}{column}"]
        if self.kind == "noul":
            return np.array([None if _missing(v) else bool(v >= 0.5) for v in values], dtype=object)
        return self.normalise(values, "model")

    def score(self, frame: pd.DataFrame, metric: str) -> np.ndarray:
        """What the threshold is on: P(true) for precision/recall, the top answer's confidence else."""
        if self.kind == "noul":
            p = frame[f"{self.name}__noul"].to_numpy(dtype=float)
            return p if metric != "accuracy" else np.maximum(p, 1 - p)
        return frame[f"{self.name}__confidence"].to_numpy(dtype=float)

    def normalise(self, values: pd.Series, field: str) -> np.ndarray:
        """Labels in the proxy's terms; a value that cannot be one is refused naming `field`."""
        out = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):
            out[i] = None if _missing(value) else self._label(value, field)
        return out

    def _label(self, value: Any, field: str) -> Any:
        if self.kind == "noul":
            if isinstance(value, bool | np.bool_) or value in (0, 1):
                return bool(value)
            raise InvalidRequest(field, f"labels of the noul question {self.name!r} are True/False; got {value!r}")
        if self.kind == "score":
            return int(float(value))
        return str(value)


def _only(questions: Mapping[str, Any]) -> str:
    if len(questions) != 1:
        raise InvalidRequest("question", f"the run asks {len(questions)} questions: name the cascaded one "
                                         "(Cascade(question=...))")
    return next(iter(questions))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


class _Oracle:
    """Answers for row positions: from the label Series, or from decision runs of the oracle model."""

    def __init__(self, frame: pd.DataFrame, state: Any, questions: Mapping[str, Any], question: _Question,
                 cascade: Cascade, options: Mapping[str, Any]) -> None:
        self.frame, self.state, self.question, self.cascade = frame, state, question, cascade
        self.asked = {question.name: questions[question.name]}
        self.options = {**options, "join": False, "prefix": ""}
        self.budget = Budget.of(options.get("budget"), options.get("prices"))
        self.sent, self.cached, self.cost = 0, 0, 0.0
        self.labels = self._labels() if isinstance(cascade.oracle, pd.Series) else None

    def _labels(self) -> pd.Series:
        series = self.cascade.oracle
        if not series.index.is_unique:
            raise InvalidRequest("oracle", "the label Series' index has duplicate labels")
        return series.reindex(self.frame.index)

    async def answer(self, positions: np.ndarray) -> np.ndarray:
        if len(positions) == 0:
            return np.empty(0, dtype=object)
        if self.labels is not None:
            values = self.question.normalise(self.labels.iloc[positions], "oracle")
            missing = [self.frame.index[p] for p, v in zip(positions, values, strict=True) if v is None]
            if missing:
                raise InvalidRequest("oracle", f"no label for {len(missing)} row(s) the cascade sends to the "
                                               f"oracle, e.g. {missing[:5]!r}")
            return values
        out = await self.frame.iloc[positions].gw.adecide(self.state, self.asked, model=self.cascade.oracle,
                                                          **{**self.options, "budget": self.budget})
        self.spent(out.run)
        return self.question.answers(out)

    def spent(self, run: Any, counted: bool = True) -> None:
        """Count an oracle run's requests (`counted`), and take what a run billed off the budget the next
        oracle run gets (its runner checks each request's estimate against it before sending)."""
        if counted:
            self.sent, self.cached, self.cost = self.sent + run.sent, self.cached + run.cached, self.cost + run.cost
        if self.budget is not None:
            tokens = None if self.budget.tokens is None else max(0, self.budget.tokens - run.input_tokens
                                                                  - run.output_tokens)
            cost = None if self.budget.cost is None else max(0.0, self.budget.cost - run.cost)
            self.budget = Budget(tokens=tokens, cost=cost, prices=self.budget.prices)


async def run_cascade(frame: pd.DataFrame, state: Any, questions: Mapping[str, Any], model: str | None,
                      cascade: Cascade, options: Mapping[str, Any]) -> BatchFrame:
    """The cascade of `df.gw.adecide(..., cascade=cascade)`: see docs/guide/cascades.md."""
    if not isinstance(cascade, Cascade):
        raise InvalidRequest("cascade", f"a gwlab.Cascade; got {type(cascade).__name__}")
    if options.get("pilot") is not None:
        raise InvalidRequest("pilot", "a cascade cannot run as a pilot yet: run the proxy alone with pilot=")
    question = _Question.of(questions, cascade)
    _check_names(frame, question, options)
    oracle = _Oracle(frame, state, questions, question, cascade, options)
    proxy = await frame.gw.adecide(state, questions, model=model, **options)
    oracle.spent(proxy.run, counted=False)
    columns = proxy.iloc[:, len(frame.columns):] if options.get("join", True) else proxy
    columns = columns.rename(columns=lambda c: c.removeprefix(options.get("prefix", "")))
    score, mine = question.score(columns, cascade.metric), question.answers(columns)
    valid = np.flatnonzero(~np.isnan(score))  # a row the proxy failed on goes to the oracle
    sampled = valid[sample_rows(score[valid], cascade)]
    asked = np.unique(sampled)
    said_by_row = dict(zip(asked.tolist(), await oracle.answer(asked), strict=True))
    sampled = sampled[[said_by_row[p] is not None for p in sampled]]  # an unanswered one says nothing
    hits = np.array([_hit(mine[p], said_by_row[p], cascade.metric) for p in sampled], dtype=bool)
    threshold = choose_threshold(score[valid], np.searchsorted(valid, sampled), hits, cascade)
    answered = np.zeros(len(frame), dtype=bool)
    answered[valid] = proxy_answers(score[valid], threshold, cascade.metric)
    answered[asked] = False
    routed = np.flatnonzero(~answered & ~np.isin(np.arange(len(frame)), asked))
    said_by_row.update(zip(routed.tolist(), await oracle.answer(routed), strict=True))
    final = _final(mine, answered, said_by_row, cascade.metric)
    out = _with_columns(proxy, question, options.get("prefix", ""), final, answered, score)
    proxy.run.cascade = _summary(cascade, threshold, answered, len(asked), len(routed), oracle)
    return BatchFrame.wrap(out, proxy.run)


CASCADE_COLUMNS = ("__answer", "__source", "__proxy_score")


def _check_names(frame: pd.DataFrame, question: _Question, options: Mapping[str, Any]) -> None:
    """Refuse a clash with the frame's columns before anything is sent (as the accessor does for its own)."""
    names = [f"{options.get('prefix', '')}{question.name}{suffix}" for suffix in CASCADE_COLUMNS]
    clash = [name for name in names if options.get("join", True) and name in frame.columns]
    if clash:
        raise InvalidRequest("prefix", f"the frame already has column {clash[0]!r}; pass prefix='...' or join=False")


def _hit(mine: Any, said: Any, metric: str) -> bool:
    """For a sampled row: was the proxy right (accuracy), or does the oracle say true (precision/recall)."""
    return bool(said is True) if metric != "accuracy" else (said is not None and mine == said)


def _final(mine: np.ndarray, answered: np.ndarray, said: Mapping[int, Any], metric: str) -> np.ndarray:
    out = np.empty(len(mine), dtype=object)
    proxy_says = {"accuracy": None, "precision": True, "recall": False}[metric]
    for position in range(len(mine)):
        if answered[position]:
            out[position] = mine[position] if proxy_says is None else proxy_says
        else:
            out[position] = said.get(position)
    return out


def _with_columns(proxy: pd.DataFrame, question: _Question, prefix: str, final: np.ndarray, answered: np.ndarray,
                  score: np.ndarray) -> pd.DataFrame:
    out = pd.DataFrame(proxy)
    answer, source, proxy_score = (f"{prefix}{question.name}{suffix}" for suffix in CASCADE_COLUMNS)
    out[answer] = pd.array(final, dtype="boolean") if question.kind == "noul" else final
    out[source] = np.where(answered, "proxy", "oracle")
    out[proxy_score] = score
    return out


def _summary(cascade: Cascade, threshold: Threshold, answered: np.ndarray, sampled: int, routed: int,
             oracle: _Oracle) -> dict[str, Any]:
    calls, n = sampled + routed, threshold.trials
    interval = clopper_pearson(threshold.successes, n, 1 - cascade.delta) if n else (math.nan,) * 2
    return {"metric": cascade.metric, "target": cascade.target, "delta": cascade.delta,
            "oracle": "labels" if oracle.labels is not None else cascade.oracle,
            "threshold": threshold.value, "proxy_rows": int(answered.sum()), "oracle_rows": len(answered) - int(
                answered.sum()), "oracle_calls": {"sampled": sampled, "routed": routed, "total": calls},
            "oracle_sent": oracle.sent, "oracle_cached": oracle.cached,
            "all_oracle_calls": len(answered), "saving": len(answered) / calls if calls else math.inf,
            "oracle_cost": oracle.cost, "all_oracle_cost": oracle.cost / calls * len(answered) if calls else 0.0,
            "estimate": threshold.estimate, "bound": threshold.bound, "interval": list(interval)}
