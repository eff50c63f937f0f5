"""The speech engines behind realtime: espeak-ng speaks, Whisper tiny.en reads it back."""

from __future__ import annotations

import re
import threading

import pytest

from gwlab.local.engines import get_speaker, get_transcriber

pytestmark = pytest.mark.slow


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


@pytest.mark.parametrize("voice", ["alloy", "echo", "shimmer"])
def test_every_voice_speaks_22050_hz_mono_pcm16(voice: str) -> None:
    pcm, rate = get_speaker().speak("Hello there.", voice)
    assert rate == 22_050
    assert len(pcm) % 2 == 0 and 0.3 < len(pcm) / 2 / rate < 3


def test_voices_sound_different() -> None:
    assert get_speaker().speak("Hello there.", "echo")[0] != get_speaker().speak("Hello there.", "shimmer")[0]


def test_empty_text_is_silence() -> None:
    assert get_speaker().speak("  ", "alloy") == (b"", 22_050)


def test_whisper_reads_back_what_espeak_said() -> None:
    pcm, rate = get_speaker().speak("What is the capital of France?", "alloy")
    heard = words(get_transcriber().transcribe(pcm, rate))
    assert {"what", "capital"} <= heard


def test_transcriber_is_safe_from_several_threads() -> None:
    pcm, rate = get_speaker().speak("Good morning.", "alloy")
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(get_transcriber().transcribe(pcm, rate)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and all("morning" in words(r) for r in results)


def test_too_short_audio_transcribes_to_nothing() -> None:
    assert get_transcriber().transcribe(b"\0\0" * 100, 24_000) == ""
