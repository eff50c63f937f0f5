"""`df.gw.aggregate`: one answer per group by map-reduce over chunks that fit the input limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import _client, recipes
from gwlab.frames.operators.packing import PACK_SHARE, pack, tokens
from gwlab.frames.operators.shared import OperatorFrame, OperatorSummary, check_text, inner, next_run, texts
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.specs import TextSpec

__all__ = ["AggregateSpec", "aggregate"]

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
        check_text(self.instruction, "instruction")
        if self.protocol not in ("chat", "responses", "messages"):
            raise InvalidRequest("protocol", f"a text family: 'chat', 'responses' or 'messages'; got {self.protocol!r}")
        for name in ("max_tokens", "max_input_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidRequest(name, f"must be a positive integer; got {value!r}")


def _prompt(spec: AggregateSpec, level: int, chunk: list[str]) -> str:
    template = MAP_PROMPT if level == 0 else REDUCE_PROMPT
    return template.format(instruction=spec.instruction, items="\n".join(f"- {item}" for item in chunk))


async def aggregate(frame: pd.DataFrame, spec: AggregateSpec, config: RunConfig) -> OperatorFrame:
    """One answer per group by map-reduce: chunks that fit the input limit are answered, their answers
    combined level by level until one remains. Every level is a checkpointed text run."""
    own = inner(config)
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
    if errors and config.failures.errors == "raise":
        key, message = next(iter(errors.items()))
        raise InvalidRequest("text", f"group {key!r}: {message} (errors='coerce' makes it an error row)")
    answers, counts = await _map_reduce(spec, items, room, own, summary, errors)
    out = pd.DataFrame({"answer": [answers.get(k) for k in groups], "rows": [len(v) for v in groups.values()],
                        "requests": [counts.get(k, 0) for k in groups],
                        "__error": [errors.get(k) for k in groups]},
                       index=pd.Index(list(groups), name=spec.by if isinstance(spec.by, str) else None))
    return OperatorFrame.of(out.rename(columns=lambda c: f"{config.output.prefix}{c}"), summary)


def _groups(frame: pd.DataFrame, spec: AggregateSpec, config: RunConfig) -> dict[Any, list[tuple[Any, str]]]:
    """Per group key: (row label, row text); a row that cannot be rendered fails by `errors=`."""
    by = [] if spec.by is None else [spec.by] if isinstance(spec.by, str) else list(spec.by)
    missing = [c for c in by if c not in frame.columns]
    if missing or (spec.by is not None and not by):
        raise InvalidRequest("by", f"unknown column {missing[0] if missing else spec.by!r}")
    default = [c for c in frame.columns if c not in by]
    row_texts, failed = texts(frame, spec.text if spec.text is not None else default, "text", config.failures.blank)
    if failed and config.failures.errors == "raise":
        position, message = min(failed.items())
        raise InvalidRequest("text", f"row {frame.index[position]!r}: {message}")
    # dropna=False: a row whose key is missing is its own group (NaN), never silently dropped
    positions = {"all": np.arange(len(frame))} if not by else frame.groupby(spec.by, sort=False, dropna=False).indices
    return {key: [(frame.index[i], text) for i in where if (text := row_texts[i]) is not None]
            for key, where in positions.items()}


async def _room(spec: AggregateSpec, own: RunConfig) -> int:
    """Estimated tokens a chunk's items may take: the input limit's packing share, less the prompt."""
    model = recipes.text_recipe(spec.protocol, spec.model, spec.max_tokens, None).model
    limit = spec.max_input_tokens
    if limit is None:
        connection = _client.connection(own.gateway)
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


async def _map_reduce(spec: AggregateSpec, items: dict[Any, list[str]], room: int, own: RunConfig,
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
        result = await _text_run(spec, [p for _, p in rows], next_run(own, summary))
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


async def _text_run(spec: AggregateSpec, prompts: list[str], own: RunConfig) -> BatchFrame:
    text = TextSpec(spec.protocol, "prompt", model=spec.model, max_tokens=spec.max_tokens)
    return await text.run(pd.DataFrame({"prompt": prompts}), own)
