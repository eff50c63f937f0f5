"""Cascades: the cheap model answers the rows it is sure of, an oracle (a better model, or people) the rest.

`Cascade` is what the user asks for. The statistical core (sampling, thresholds, certificates) works on
arrays in `gwlab/stats/cascade.py`, so its guarantee is simulated without a gateway
(tests/stats/test_cascade_guarantee.py); `run_cascade` in `frames/cascade/run.py` wires it to
`df.gw.decide`. See docs/guide/cascades.md for exactly what each metric guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.stats.cascade import Threshold, choose_threshold, proxy_answers, sample_rows
from gwlab.wire.families import TEXT

__all__ = ["METRICS", "ORACLE_PROTOCOLS", "Cascade", "DecisionOracle", "LabelsOracle", "OracleSpec", "TextOracle",
           "Threshold", "choose_threshold", "proxy_answers", "sample_rows"]

Metric = Literal["accuracy", "precision", "recall"]
METRICS: tuple[str, ...] = ("accuracy", "precision", "recall")
ORACLE_PROTOCOLS: tuple[str, ...] = ("decisions", *TEXT)
# a text oracle's answer is one short JSON object; the cap is what a budget reserves for it per row
ORACLE_MAX_TOKENS = 256


@dataclass(frozen=True, slots=True, eq=False)
class LabelsOracle:
    """People's answers: a pandas Series of labels on the frame's index (read by the evaluation's reader)."""

    labels: pd.Series

    def __post_init__(self) -> None:
        if not isinstance(self.labels, pd.Series):
            raise InvalidRequest("oracle", f"labels are a pandas Series; got {type(self.labels).__name__}")

    @property
    def name(self) -> str:
        return "labels"


@dataclass(frozen=True, slots=True)
class DecisionOracle:
    """Another (better) decision model, asked the same question through the decisions family."""

    model: str

    def __post_init__(self) -> None:
        _check_model(self.model)

    @property
    def name(self) -> str:
        return self.model


@dataclass(frozen=True, slots=True)
class TextOracle:
    """A text model asked the question in words, its answer held to the question's outcomes by a schema,
    through `protocol` ("chat", "responses" or "messages"); `max_tokens` caps each answer."""

    model: str
    protocol: str = "chat"
    max_tokens: int = ORACLE_MAX_TOKENS

    def __post_init__(self) -> None:
        _check_model(self.model)
        if self.protocol not in TEXT:
            raise InvalidRequest("protocol", f"one of {', '.join(ORACLE_PROTOCOLS)}; got {self.protocol!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidRequest("max_tokens", f"a positive integer; got {self.max_tokens!r}")

    @property
    def name(self) -> str:
        return f"{self.model} ({self.protocol})"


OracleSpec = LabelsOracle | DecisionOracle | TextOracle  # who answers a cascade's hard rows


def _check_model(model: object) -> None:
    if not (isinstance(model, str) and model.strip()):
        raise InvalidRequest("oracle", f"a model id or a pandas Series of labels; got {type(model).__name__}")


def oracle_spec(oracle: object, protocol: str, max_tokens: int) -> OracleSpec:
    """The typed oracle of `Cascade(oracle=..., protocol=..., max_tokens=...)`: a Series is labels, a model
    id is reached through `protocol`; a typed oracle is kept (and the two settings must not contradict it)."""
    if isinstance(oracle, LabelsOracle | DecisionOracle | TextOracle):
        return oracle
    if isinstance(oracle, pd.Series):
        if protocol != "decisions":
            raise InvalidRequest("protocol", "labels are not reached through a family: leave protocol unset")
        return LabelsOracle(oracle)
    _check_model(oracle)
    if protocol not in ORACLE_PROTOCOLS:
        raise InvalidRequest("protocol", f"one of {', '.join(ORACLE_PROTOCOLS)}; got {protocol!r}")
    return DecisionOracle(str(oracle)) if protocol == "decisions" else TextOracle(str(oracle), protocol, max_tokens)


@dataclass(frozen=True, slots=True)
class Cascade:
    """A cascade for `df.gw.decide(..., cascade=Cascade(...))`: the cheap model answers the confident rows.

    oracle: a model id, or a pandas Series of labels on the frame's index (people's answers: "automate
    the confident rows, send the rest to a person"), or a typed oracle (`LabelsOracle`, `DecisionOracle`,
    `TextOracle`); once built, `oracle` is always the typed one. protocol: the family a model id is
    reached through: "decisions" (another decision model), or "chat", "responses", "messages" (a text
    model asked the same question, its answer held to the question's outcomes by a schema; max_tokens
    caps each answer). metric/target/delta: the guarantee (the metric is at least `target` with probability at
    least 1 - delta). sample: rows the oracle answers first, to set the threshold (seeded by `seed`);
    candidates: thresholds tried (quantiles of the scores); question: which question of the run
    (default: the only one).
    """

    oracle: OracleSpec | str | pd.Series
    metric: Metric = "accuracy"
    target: float = 0.9
    delta: float = 0.05
    sample: int = 100
    seed: int = 0
    candidates: int = 20
    question: str | None = None
    protocol: str = "decisions"
    max_tokens: int = ORACLE_MAX_TOKENS

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidRequest("max_tokens", f"a positive integer; got {self.max_tokens!r}")
        typed = oracle_spec(self.oracle, self.protocol, self.max_tokens)
        object.__setattr__(self, "oracle", typed)  # one typed oracle; protocol and max_tokens agree with it
        object.__setattr__(self, "protocol", typed.protocol if isinstance(typed, TextOracle) else "decisions")
        if isinstance(typed, TextOracle):
            object.__setattr__(self, "max_tokens", typed.max_tokens)
        if self.metric not in METRICS:
            raise InvalidRequest("metric", f"one of {', '.join(METRICS)}; got {self.metric!r}")
        for name in ("target", "delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise InvalidRequest(name, f"a number strictly between 0 and 1; got {value!r}")
        for name in ("sample", "candidates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidRequest(name, f"a positive integer; got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidRequest("seed", f"an integer; got {self.seed!r}")

    @property
    def typed_oracle(self) -> OracleSpec:
        """`oracle`, typed as what it is once built (`LabelsOracle`, `DecisionOracle` or `TextOracle`)."""
        assert isinstance(self.oracle, LabelsOracle | DecisionOracle | TextOracle)
        return self.oracle

    def __repr__(self) -> str:
        typed = self.typed_oracle
        oracle = f"<labels: {len(typed.labels)} rows>" if isinstance(typed, LabelsOracle) else repr(typed.model)
        via = "" if self.protocol == "decisions" else f", protocol={self.protocol!r}"
        return (f"Cascade(oracle={oracle}{via}, metric={self.metric!r}, target={self.target}, delta={self.delta}, "
                f"sample={self.sample}, seed={self.seed})")
