"""What a row-run `df.gw` method asks for, as a frozen spec that runs itself over a frame with a checked
`RunConfig`: `DecideSpec`, `TextSpec` (chat, respond, messages), `ExtractSpec`. The accessor builds the
spec and the config at its door; the cascade, its oracle, the operators and Dask partitions run the same
specs with a config of their own (`config.but(join=False, ...)`), so nothing below the door reads an
options dict. An extract run's summary is typed here too (`ExtractRunSummary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from gwlab.frames import _client, recipes, steps
from gwlab.frames.extract import DEFAULT_MAX_REASKS, Structured, extract_recipe
from gwlab.frames.grounding.columns import GroundingMode
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.outcome import RunSummary
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.templates import Template
from gwlab.wire.schema import Schema

__all__ = ["EXTRACT_OWN", "DecideSpec", "ExtractRunSummary", "ExtractSpec", "TextSpec"]

TemplateSpec = str | Sequence[str] | Mapping[str, str]


@dataclass(frozen=True)
class DecideSpec:
    """`df.gw.decide`'s request: the state template, the questions, the model."""

    state: TemplateSpec
    questions: Mapping[str, Any]
    model: str | None = None

    async def run(self, frame: pd.DataFrame, config: RunConfig) -> BatchFrame:
        family = recipes.decisions_recipe_for(self.questions, self.model)
        rows = Template.parse(self.state, frame.columns, field="state").rows(frame, blank=config.failures.blank)
        return await steps.run_rows(frame, family, rows, config, {"state": self.state})


@dataclass(frozen=True)
class TextSpec:
    """A text family's request per row: `chat` and `messages` take a `system` text, `responses` its
    `instructions` (held in `system` here, recorded under its own name)."""

    protocol: str
    prompt: TemplateSpec
    system: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] | None = None

    async def run(self, frame: pd.DataFrame, config: RunConfig) -> BatchFrame:
        recipe = recipes.text_recipe(self.protocol, self.model, self.max_tokens, self.params)
        field = "instructions" if self.protocol == "responses" else "system"
        rows = steps.prompts(frame, self.prompt, self.system, field, config.failures.blank)
        return await steps.run_rows(frame, recipe, rows, config, {"prompt": self.prompt, field: self.system})


EXTRACT_OWN = ("max_reasks", "structured", "grounding", "source")  # extract's keywords beyond the run's


@dataclass(frozen=True)
class ExtractSpec:
    """`df.gw.extract`'s request: the schema's fields from each row's prompt, and how they are asked for
    (`EXTRACT_OWN`, typed in `ExtractOptions` and documented in `EXTRACT_OPTIONS_DOC`)."""

    prompt: TemplateSpec
    schema: Schema
    protocol: str = "chat"
    system: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] | None = None
    max_reasks: int = DEFAULT_MAX_REASKS
    structured: Structured = "auto"
    grounding: GroundingMode | None = None
    source: str | None = None

    async def run(self, frame: pd.DataFrame, config: RunConfig) -> BatchFrame:
        plan = steps.grounding_plan(frame, self.prompt, self.schema, self.grounding, self.source)
        dialects = _client.connection(config.gateway).dialects
        recipe, mode = extract_recipe(self.protocol, self.schema, self.model, self.max_tokens, self.params,
                                      max_reasks=self.max_reasks, structured=self.structured, dialects=dialects)
        template = {"prompt": self.prompt, "system": self.system, "schema": self.schema.json,
                    **steps.grounding_note(plan)}

        def summarise(run: RunSummary) -> RunSummary:
            return ExtractRunSummary.of(run, mode.note(), template.get("grounding"))

        rows = steps.prompts(frame, self.prompt, self.system, blank=config.failures.blank)
        return await steps.run_rows(frame, recipe, rows, config, template,
                                    convert=steps.typed_and_grounded(frame, self.schema, plan), derived=plan,
                                    summarise=summarise)


@dataclass
class ExtractRunSummary(RunSummary):
    """An extract run's summary: every run's, with how structured output was asked when not natively
    (`structured`, None when native) and the grounding asked for (`{"mode", "source"}`, None when off)."""

    structured: str | None = None
    grounding: dict[str, Any] | None = None

    @classmethod
    def of(cls, run: RunSummary, structured: str | None, grounding: dict[str, Any] | None) -> ExtractRunSummary:
        return cls(**{f.name: getattr(run, f.name) for f in fields(RunSummary)}, structured=structured,
                   grounding=grounding)

    def notes(self) -> list[str]:
        return [*super().notes(), *([f"structured output: {self.structured}"] if self.structured else [])]
