"""Model IDs: the `GET /models` body read tolerantly, and the check every request's `model` passes.

The body collides between vendors (protocols.md §0): OpenAI lists `data[]` of `{id, object, created,
owned_by}`, Anthropic adds `display_name`/`created_at` to the same `data[]`, TypeSafe reads
`models[]` of `{name, ...}`. The reader takes `data[]` first and falls back to `models[]`; whatever
an entry carries beyond the typed fields stays in its `raw`.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest

__all__ = ["DEFAULT_MODELS", "ModelInfo", "ModelList", "check_model_id", "default_model", "parse_models"]

# The model a call uses when it names none, one per ability, written once: `gw.decide`, `df.gw.decide`,
# `%%gw decide` and the DecisionExplorer default to "decisions"; `df.gw.chat`/`respond`/`messages` and
# `%%gw chat` to "text". They are the embedded gateway's models (a hosted gateway answers 404 for them
# with the model named: pass `model=` there).
# Text: SmolLM2-135M-Instruct, measured against Gemma 3 270M (bench/engines.py --chat, docs/gateway.md):
# as good on short answers, better on summaries, 0.6x the CPU and memory, and Apache-2.0.
# Realtime (the RealtimeConsole widget; the gateway's POST /realtime/sessions without a model): SmolLM2 too,
# within the 1.2 s first-audio goal, told to answer in a sentence or two (docs/gateway.md, "Realtime voice").
# Videos and images: the embedded gateway's preview renderers (they draw the prompt; they generate nothing),
# also what its routes use when a submission names no model.
# Embeddings: the decision model's own vectors (multilingual-e5-small).
DEFAULT_MODELS = {"decisions": "local/decide-e5-small", "embeddings": "local/decide-e5-small",
                  "text": "local/smollm2-135m-instruct", "realtime": "local/realtime-smollm2-135m-instruct",
                  "videos": "local/video-preview", "images": "local/image-preview"}


def default_model(model: str | None, ability: str | None) -> str:
    """`model`, or the ability's default when none was given (None): one rule for every call that asks.

    An empty string is not "none given": it goes on to `check_model_id`, which refuses it naming the field.
    A family without an ability (a family row's `ability` may be None) has no default: the model is required."""
    if model is not None:
        return model
    if ability is None or ability not in DEFAULT_MODELS:
        raise InvalidRequest("model", "required: this family has no default model (see gw.models())")
    return DEFAULT_MODELS[ability]


def check_model_id(model: Any, field_name: str = "model") -> str:
    """`model` if it is a non-empty string; otherwise InvalidRequest naming the field."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest(field_name, f"required: a model ID visible to the key (see gw.models()); "
                                         f"got {model!r}")
    return model


@dataclass(frozen=True, slots=True)
class ModelInfo:
    id: str
    owned_by: str | None = None
    created: int | float | str | None = None  # Unix seconds (OpenAI) or RFC 3339 (Anthropic)
    display_name: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_wire(cls, data: Any) -> ModelInfo | None:
        """None for an entry without any usable id (skipped, but kept in the list's `raw`)."""
        if isinstance(data, str):
            return cls(data, raw={"id": data})
        if not isinstance(data, Mapping):
            return None
        model_id = data.get("id") or data.get("name")
        if not isinstance(model_id, str) or not model_id:
            return None
        created = data.get("created", data.get("created_at"))
        return cls(model_id, data.get("owned_by"), created, data.get("display_name"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class ModelList:
    """The models visible to the key, in the gateway's order."""

    models: list[ModelInfo]
    request_id: str | None = None
    raw: Any = field(default=None, repr=False)

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.models]

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def __contains__(self, model_id: object) -> bool:
        return any(m.id == model_id for m in self.models)

    def __repr__(self) -> str:
        return f"ModelList({self.ids!r})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(m.id)}</code></td>"
                       f"<td>{html.escape(str(m.owned_by or ''))}</td></tr>" for m in self.models)
        return f"<table><thead><tr><th>model</th><th>owned by</th></tr></thead><tbody>{rows}</tbody></table>"


def parse_models(data: Any, request_id: str | None = None) -> ModelList:
    """The typed list of a `/models` body: `data[]`, else `models[]`, else a bare list."""
    entries: Any = ()
    if isinstance(data, Mapping):
        entries = got if isinstance(got := data.get("data"), list) else data.get("models") or ()
    elif isinstance(data, list):
        entries = data
    models = [m for m in map(ModelInfo.from_wire, entries) if m is not None]
    return ModelList(models, request_id, raw=data)
