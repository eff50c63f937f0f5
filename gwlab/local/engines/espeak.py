"""Text to speech: libespeak-ng from the `espeakng-loader` wheel, driven through ctypes."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

# the spec's voices as espeak-ng variants: a neutral, a male and a female one that Whisper tiny.en
# transcribed best among the stock variants (~90 % of words on a small sample)
VOICE_VARIANTS: dict[str, str] = {"alloy": "en-us", "echo": "en-us+m1", "shimmer": "en-us+f2"}

_SYNCHRONOUS = 2  # espeak_AUDIO_OUTPUT: samples come back through the callback, no sound device
_CHARS_UTF8 = 1
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class EspeakSpeaker:
    """Formant speech: instant (~1 ms per sentence), robotic, 22,050 Hz mono int16.

    libespeak-ng keeps global state (one voice, one callback), so the library is initialised once
    per process and every call holds one process-wide lock. The same text is not bit-identical
    from call to call: the pitch flutter's phase is a function-static counter inside the library
    that carries over from the previous utterance and has no reset."""

    model_id = "espeak-ng"
    _lock = threading.Lock()
    _lib: Any = None
    _rate = 0
    _chunks: list[bytes] = []  # noqa: RUF012 - shared on purpose: the C callback has no user data
    _callback: Any = None  # kept referenced, or ctypes frees the trampoline under the library

    @classmethod
    def _load(cls) -> Any:
        if cls._lib is None:
            import espeakng_loader  # the optional `speech` extra (GPL-3.0-or-later library)

            lib = ctypes.CDLL(espeakng_loader.get_library_path())
            lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
            lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
            lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                         ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
            rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0)
            if rate <= 0:
                raise RuntimeError("libespeak-ng failed to initialise")

            def collect(wav: Any, count: int, _events: Any) -> int:
                if count > 0:
                    cls._chunks.append(ctypes.string_at(wav, count * 2))
                return 0  # 0: go on synthesising

            cls._callback = _CALLBACK(collect)
            lib.espeak_SetSynthCallback(cls._callback)
            cls._lib, cls._rate = lib, rate
        return cls._lib

    def speak(self, text: str, voice: str = "alloy") -> tuple[bytes, int]:
        """Speech for `text` as mono signed 16-bit little-endian PCM, and its sample rate."""
        data = text.encode()
        with self._lock:
            lib = self._load()
            lib.espeak_SetVoiceByName(VOICE_VARIANTS.get(voice, VOICE_VARIANTS["alloy"]).encode())
            self._chunks.clear()
            if data.strip():
                lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, _CHARS_UTF8, None, None)
                lib.espeak_Synchronize()
            pcm = b"".join(self._chunks)
            self._chunks.clear()
            return pcm, self._rate
