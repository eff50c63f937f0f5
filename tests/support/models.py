"""The model ids tests ask the embedded gateway for, read from gwlab's own tables (never copied).

The text and realtime tests use Gemma 3 270M, which is always installed (SmolLM2, the default, is an
optional wheel); decisions, videos and images use the defaults a call gets when it names no model.
"""

from __future__ import annotations

from gwlab.local.catalog import REALTIME_GEMMA
from gwlab.local.engines.gemma import MODEL_ID as GEMMA
from gwlab.wire.models import DEFAULT_MODELS

DECIDE_MODEL: str = DEFAULT_MODELS["decisions"]
VIDEO_MODEL: str = DEFAULT_MODELS["videos"]
IMAGE_MODEL: str = DEFAULT_MODELS["images"]
TEXT_MODEL: str = GEMMA
TEXT_MODELS: tuple[str, ...] = (GEMMA, DEFAULT_MODELS["text"])  # every local text model: base, instruct
REALTIME_MODEL: str = REALTIME_GEMMA
PROMPT = "Q: What is the capital of France?\nA:"  # a base model completes it with a short answer
