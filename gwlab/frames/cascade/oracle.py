"""Who answers a cascade's hard rows: a label Series, a decision model, or a chat/responses/messages model.

A text model is asked the decision model's question in words (`wire/decisions_text.py`) through
`df.gw.extract`, its answer held by a schema to the question's outcomes; so a text oracle's run is an
ordinary extract run (checkpointed, budgeted, re-asked when invalid) and an answer it did not give
validly is missing, never guessed. Every oracle run's requests are counted and billed against the
budget the cascade was given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.cascade.spec import Cascade, DecisionOracle, LabelsOracle, TextOracle
from gwlab.frames.cascade.summary import OracleSpend, RoutedEstimate
from gwlab.frames.evaluation.labels import as_answers
from gwlab.frames.evaluation.targets import question_levels, question_options
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.specs import DecideSpec, ExtractSpec
from gwlab.frames.templates import Template
from gwlab.wire.decisions import render_state
from gwlab.wire.decisions_text import ANSWER_FIELD, answer_schema, question_prompt
from gwlab.wire.schema import Schema

__all__ = ["PROMPT_COLUMN", "CascadeQuestion", "FromDecisionModel", "FromLabels", "FromTextModel", "Oracle"]

PROMPT_COLUMN = "__oracle_prompt"  # the text oracle's prompt per row, on a copy of the rows it is sent


@dataclass(frozen=True)
class CascadeQuestion:
    """The cascaded question: its id, type and the columns its answer and confidence are read from."""

    name: str
    kind: str

    @classmethod
    def of(cls, questions: Mapping[str, Any], cascade: Cascade) -> CascadeQuestion:
        name = cascade.question if cascade.question is not None else _only(questions)
        if name not in questions:
            raise InvalidRequest("question", f"{name!r} is not one of the run's questions ({', '.join(questions)})")
        kind = questions[name].get("type") if isinstance(questions[name], Mapping) else None
        if cascade.metric != "accuracy" and kind != "noul":
            raise InvalidRequest("metric", f"{cascade.metric!r} needs a noul question; {name!r} is {kind!r}")
        return cls(name, str(kind))

    def answers(self, frame: pd.DataFrame) -> np.ndarray:
        """The model's answer per row: True/False (noul), the option (choice), the level (score)."""
        field = self.kind if self.kind in (tidy.NOUL, tidy.CHOICE) else tidy.LEVEL
        values = frame[tidy.column(self.name, field)]
        if self.kind == "noul":
            return np.array([None if _missing(v) else tidy.reads_yes(v) for v in values], dtype=object)
        return self.normalise(values, "model")

    def score(self, frame: pd.DataFrame, metric: str) -> np.ndarray:
        """What the threshold is on: P(true) for precision/recall, the top answer's confidence else."""
        if self.kind == "noul":
            p = frame[tidy.column(self.name, tidy.NOUL)].to_numpy(dtype=float)
            return p if metric != "accuracy" else np.maximum(p, 1 - p)
        return frame[tidy.column(self.name, tidy.CONFIDENCE)].to_numpy(dtype=float)

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


class Oracle:
    """Answers for row positions, and what they cost: one subclass per kind of oracle (`Oracle.of` picks
    it by the cascade's typed oracle), the accounting and the budget shared."""

    def __init__(self, frame: pd.DataFrame, asked: DecideSpec, question: CascadeQuestion, cascade: Cascade,
                 config: RunConfig) -> None:
        self.frame, self.question, self.cascade = frame, question, cascade
        self.state = asked.state
        self.asked = {question.name: asked.questions[question.name]}
        self.config = config.but(join=False, prefix="", pilot=None)  # a pilot limits the proxy only
        self.budget = Budget.of(config.spending.budget, config.spending.prices)
        self.sent, self.cached, self.cost, self.tokens = 0, 0, 0.0, 0
        self.input_tokens = self.output_tokens = 0

    @staticmethod
    def of(frame: pd.DataFrame, asked: DecideSpec, question: CascadeQuestion, cascade: Cascade,
           config: RunConfig) -> Oracle:
        """The oracle of `cascade` for the proxy's request `asked` over `frame` (`config`: the proxy's)."""
        match cascade.typed_oracle:
            case LabelsOracle():
                return FromLabels(frame, asked, question, cascade, config)
            case DecisionOracle():
                return FromDecisionModel(frame, asked, question, cascade, config)
            case TextOracle():
                return FromTextModel(frame, asked, question, cascade, config)
        raise InvalidRequest("oracle", f"an oracle gwlab knows; got {type(cascade.oracle).__name__}")

    @property
    def name(self) -> str:
        """What answered, for the run's summary: "labels", or the model id (with its family if not decisions)."""
        return self.cascade.typed_oracle.name

    @property
    def spend(self) -> OracleSpend:
        """What this oracle has spent so far, for the cascade's summary."""
        return OracleSpend(self.name, self.sent, self.cached, self.cost)

    async def answer(self, positions: np.ndarray) -> np.ndarray:
        """The oracle's answers for these row positions (None where it gave none validly)."""
        if len(positions) == 0:
            return np.empty(0, dtype=object)
        out, said = await self._ask(self.frame.iloc[positions], self.config.but(budget=self.budget))
        self.spent(out.run)
        return said

    async def _ask(self, rows: pd.DataFrame, config: RunConfig) -> tuple[BatchFrame, np.ndarray]:
        raise NotImplementedError

    def estimate(self, calls: int) -> RoutedEstimate:
        """What `calls` more oracle answers should cost, at the requests sent so far (the sample's): told
        before the routed rows are sent, with whether the budget left covers it (None: no budget, or no
        measured price). A model whose sample came all from the checkpoint (or was not paid for) has no
        measured price (NaN), and a spent budget covers no paid call."""
        if self.sent:
            tokens, cost = calls * self.tokens / self.sent, calls * self.cost / self.sent
        else:
            tokens = cost = math.nan
        return RoutedEstimate(calls, tokens, cost, self._covers(calls, tokens, cost))

    def _covers(self, calls: int, tokens: float, cost: float) -> bool | None:
        left = self.budget
        if left is None or calls == 0:
            return None if left is None else True
        if left.tokens == 0 or left.cost == 0:
            return False
        if math.isnan(tokens):
            return None
        return bool((left.tokens is None or tokens <= left.tokens) and (left.cost is None or cost <= left.cost))

    def spent(self, run: RunSummary, counted: bool = True) -> None:
        """Count an oracle run's requests (`counted`), and take what a run billed off the budget the next
        oracle run gets (its runner checks each request's estimate against it before sending)."""
        if counted:
            self.sent, self.cached, self.cost = self.sent + run.sent, self.cached + run.cached, self.cost + run.cost
            self.tokens += run.input_tokens + run.output_tokens
            self.input_tokens, self.output_tokens = (self.input_tokens + run.input_tokens,
                                                     self.output_tokens + run.output_tokens)
        if self.budget is not None:
            tokens = None if self.budget.tokens is None else max(0, self.budget.tokens - run.input_tokens
                                                                  - run.output_tokens)
            cost = None if self.budget.cost is None else max(0.0, self.budget.cost - run.cost)
            self.budget = Budget(tokens=tokens, cost=cost, prices=self.budget.prices)


class FromLabels(Oracle):
    """People's answers, read when the cascade is built (before the proxy is paid for); they cost nothing."""

    def __init__(self, frame: pd.DataFrame, asked: DecideSpec, question: CascadeQuestion, cascade: Cascade,
                 config: RunConfig) -> None:
        super().__init__(frame, asked, question, cascade, config)
        self.labels = self._labels(config.spending.pilot)

    def _labels(self, pilot: int | None) -> pd.Series:
        """The labels in the proxy's terms, read (and refused) by the evaluation's label reader when the
        cascade is built, before the proxy is paid for. Every row the proxy may reach (the pilot's first
        rows, else all) may go to the oracle, so a missing label among them is refused then too: found
        later, it would stop a cascade whose cheap model was already paid for."""
        oracle = self.cascade.typed_oracle
        assert isinstance(oracle, LabelsOracle)
        series = oracle.labels
        if not series.index.is_unique:
            raise InvalidRequest("oracle", "the label Series' index has duplicate labels")
        series = series.reindex(self.frame.index)
        spec, kind = self.asked[self.question.name], self.question.kind
        classes = ["false", "true"] if kind == "noul" else question_options(spec, kind)
        if classes is None:
            raise InvalidRequest("oracle", f"question {self.question.name!r} names no options to read labels by")
        read = as_answers(self.question.name, series, kind, classes, question_levels(spec) if kind == "score" else None)
        reachable = read[:pilot] if pilot is not None else read
        missing = [self.frame.index[int(p)] for p in np.flatnonzero([v is None for v in reachable])]
        if missing:
            raise InvalidRequest("oracle", f"no label for {len(missing)} of the {len(reachable)} rows the cascade "
                                           f"may send to the oracle (any row the cheap model reaches), e.g. "
                                           f"{missing[:5]!r}; label them, or run the cascade on the labelled rows "
                                           "(frame[labels.notna()])")
        return pd.Series(read, index=series.index, dtype=object)

    async def answer(self, positions: np.ndarray) -> np.ndarray:
        if len(positions) == 0:
            return np.empty(0, dtype=object)
        return self.labels.iloc[positions].to_numpy()  # every reachable row's label was checked up front

    def estimate(self, calls: int) -> RoutedEstimate:
        return RoutedEstimate(calls, 0.0, 0.0, None if self.budget is None else True)


class FromDecisionModel(Oracle):
    """Another decision model, asked the proxy's question as a `decide` run."""

    async def _ask(self, rows: pd.DataFrame, config: RunConfig) -> tuple[BatchFrame, np.ndarray]:
        oracle = self.cascade.typed_oracle
        assert isinstance(oracle, DecisionOracle)
        out = await DecideSpec(self.state, self.asked, oracle.model).run(rows, config)
        return out, self.question.answers(out)


class FromTextModel(Oracle):
    """The question in words to a text model, one extract request per row, its answer held to the
    outcomes by the schema; a row whose state cannot be rendered fails as it did for the proxy."""

    async def _ask(self, rows: pd.DataFrame, config: RunConfig) -> tuple[BatchFrame, np.ndarray]:
        oracle = self.cascade.typed_oracle
        assert isinstance(oracle, TextOracle)
        template = Template.parse(self.state, rows.columns, field="state")
        states = template.rows(rows, blank=config.failures.blank)
        spec = self.asked[self.question.name]
        prompts = [None if code < 0 else question_prompt(render_state(states.value(code)), spec, self.question.name)
                   for code in states.codes]
        asked = pd.DataFrame({PROMPT_COLUMN: prompts}, index=rows.index)
        extract = ExtractSpec(PROMPT_COLUMN, Schema.of(answer_schema(spec, self.question.name)),
                              protocol=oracle.protocol, model=oracle.model, max_tokens=oracle.max_tokens)
        out = await extract.run(asked, config)
        return out, self.question.normalise(out[ANSWER_FIELD], "oracle")
