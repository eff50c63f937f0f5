"""Server-side turn detection (`server_vad`): an energy detector over 20 ms frames.

Why energy and not a model: no packaged VAD model ships in a wheel (NOTES.md), the input is speech
into a microphone or synthetic speech, and an energy gate with a hangover (the silence duration) is
what telephony stacks have long used for end-of-turn detection. The spec's threshold 0.0-1.0 maps
linearly onto a frame level of -70 to -10 dBFS: the default 0.5 is -40 dBFS, above a quiet room's
noise (~-55 dBFS) and below the quiet consonants of normal speech (~-35 dBFS)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FRAME_MS = 20
MIN_SPEECH_MS = 60  # voiced frames in a row before speech counts as started: clicks are shorter
LEVEL_AT_ZERO_DB, LEVEL_SPAN_DB = -70.0, 60.0


def threshold_dbfs(threshold: float) -> float:
    """The frame level (dBFS) that counts as voiced for a spec threshold in 0.0-1.0."""
    return LEVEL_AT_ZERO_DB + LEVEL_SPAN_DB * threshold


@dataclass(frozen=True, slots=True)
class VadEvent:
    kind: str  # "started" | "stopped"
    sample: int  # started: first voiced sample; stopped: end of the silence that ended the turn


class EnergyVad:
    """Feed int16 samples as they arrive; get `started`/`stopped` events at sample positions.

    Positions count every sample fed since construction. Prefix padding is the caller's business (it
    keeps that much audio before `started`); the silence duration is the hangover that ends a turn."""

    def __init__(self, rate: int, threshold: float, silence_duration_ms: int) -> None:
        self.rate = rate
        self.frame = rate * FRAME_MS // 1000
        self._level = 10 ** (threshold_dbfs(threshold) / 10)  # mean square, full scale = 1
        self._min_voiced = max(1, MIN_SPEECH_MS // FRAME_MS)
        self._max_silent = max(1, silence_duration_ms // FRAME_MS)
        self._pending = np.zeros(0, dtype=np.float32)
        self._position = 0  # samples consumed in whole frames
        self._voiced_run = 0
        self._silent_run = 0
        self.in_speech = False

    @property
    def silent_ms(self) -> int:
        """How long the current pause in speech has lasted (0 while voiced or outside speech)."""
        return self._silent_run * FRAME_MS if self.in_speech else 0

    def feed(self, samples: NDArray[np.int16]) -> list[VadEvent]:
        data = np.concatenate([self._pending, samples.astype(np.float32) / 32768.0])
        count = data.size // self.frame
        self._pending = data[count * self.frame:]
        if not count:
            return []
        power = np.mean(np.square(data[: count * self.frame].reshape(count, self.frame)), axis=1)
        events = []
        for voiced in power >= self._level:
            self._position += self.frame
            if not self.in_speech:
                self._voiced_run = self._voiced_run + 1 if voiced else 0
                if self._voiced_run >= self._min_voiced:
                    self.in_speech, self._silent_run = True, 0
                    events.append(VadEvent("started", self._position - self._voiced_run * self.frame))
            else:
                self._silent_run = 0 if voiced else self._silent_run + 1
                if self._silent_run >= self._max_silent:
                    self.in_speech, self._voiced_run = False, 0
                    events.append(VadEvent("stopped", self._position))
        return events
