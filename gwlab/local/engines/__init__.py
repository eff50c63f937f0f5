"""The local engines, each built once per process on first use."""

from __future__ import annotations

import functools

from gwlab.local.engines.base import Speaker, Transcriber


@functools.cache
def get_transcriber() -> Transcriber:
    """Whisper tiny.en (realtime input transcription); the model itself loads on the first call."""
    from gwlab.local.engines.whisper import WhisperTranscriber

    return WhisperTranscriber()


@functools.cache
def get_speaker() -> Speaker:
    """espeak-ng (realtime speech output)."""
    from gwlab.local.engines.espeak import EspeakSpeaker

    return EspeakSpeaker()
