"""The energy VAD behind server_vad, on real espeak-ng speech."""

from __future__ import annotations

import numpy as np
import pytest

from gwlab.local.realtime.vad import EnergyVad, threshold_dbfs
from tests.support.realtime import silence, spoken

RATE = 24_000


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2")


def test_threshold_maps_linearly_onto_frame_level() -> None:
    assert (threshold_dbfs(0.0), threshold_dbfs(0.5), threshold_dbfs(1.0)) == (-70.0, -40.0, -10.0)


def test_one_utterance_gives_one_start_and_one_stop() -> None:
    speech = spoken("What is the capital of France?")
    vad = EnergyVad(RATE, 0.5, 500)
    events = vad.feed(samples(silence(400) + speech + silence(800)))
    assert [e.kind for e in events] == ["started", "stopped"]
    start_ms, stop_ms = (e.sample * 1000 // RATE for e in events)
    assert 350 <= start_ms <= 500  # the speech begins at 400 ms (espeak adds a little lead-in)
    speech_end = 400 + len(speech) // 2 * 1000 // RATE
    assert speech_end - 300 <= stop_ms - 500 <= speech_end  # stop = last voiced frame + the silence duration


def test_pauses_shorter_than_the_silence_duration_do_not_end_the_turn() -> None:
    pcm = spoken("One.") + silence(300) + spoken("Two.") + silence(1200)
    events = EnergyVad(RATE, 0.5, 600).feed(samples(pcm))
    assert [e.kind for e in events] == ["started", "stopped"]


def test_a_longer_pause_ends_the_turn() -> None:
    pcm = spoken("One.") + silence(900) + spoken("Two.") + silence(900)
    events = EnergyVad(RATE, 0.5, 500).feed(samples(pcm))
    assert [e.kind for e in events] == ["started", "stopped", "started", "stopped"]


def test_highest_threshold_ignores_normal_speech_and_lowest_hears_quiet_noise() -> None:
    pcm = spoken("Hello there, how are you?") + silence(600)
    assert EnergyVad(RATE, 1.0, 500).feed(samples(pcm)) == []
    hiss = (np.random.default_rng(1).normal(0, 30, RATE)).astype("<i2")  # ~ -60 dBFS
    assert EnergyVad(RATE, 0.5, 500).feed(hiss) == []
    assert [e.kind for e in EnergyVad(RATE, 0.0, 500).feed(hiss)] == ["started"]


@pytest.mark.parametrize("chunk", [1, 333, 480, 4800])
def test_chunking_does_not_change_the_events(chunk: int) -> None:
    pcm = samples(silence(200) + spoken("Good morning.") + silence(700))
    whole = EnergyVad(RATE, 0.5, 500).feed(pcm)
    vad = EnergyVad(RATE, 0.5, 500)
    pieces = [e for start in range(0, pcm.size, chunk) for e in vad.feed(pcm[start:start + chunk])]
    assert pieces == whole


def test_silent_ms_counts_the_current_pause_only_inside_speech() -> None:
    vad = EnergyVad(RATE, 0.5, 1000)
    vad.feed(samples(spoken("Hello there.")))
    vad.feed(samples(silence(300)))
    assert vad.in_speech and 260 <= vad.silent_ms <= 300
    vad.feed(samples(spoken("Again.")))
    assert vad.silent_ms < 100  # the pause is over (espeak ends with a short fade)
    assert EnergyVad(RATE, 0.5, 1000).silent_ms == 0
