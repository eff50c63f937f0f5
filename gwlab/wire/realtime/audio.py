"""Audio facts of the realtime wire, pure numpy: pcm16, G.711, resampling, WAV, frames.

Why here and not in the client: the gateway's realtime route decodes and resamples the same bytes
the client encodes, and one implementation cannot disagree with itself. Nothing but numpy and the
standard library is imported, so the server can use it without pulling in a client dependency.

G.711 follows the ITU-T segment tables as the classic Sun reference code writes them (the code
behind CPython's `audioop`, SoX and most telephony stacks): 16-bit input is truncated to 14 bits
(µ-law) or 13 bits (A-law) by an arithmetic shift, then encoded by segment. The ITU G.191 tools
differ only in rounding negative inputs (one's complement); for -1, Sun gives 0x7E, G.191 0x7F.
"""

from __future__ import annotations

import io
import math
import os
import wave
from collections.abc import Callable, Iterator
from functools import cache
from typing import IO, Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from gwlab.wire.limits import AUDIO_FORMATS, G711_SAMPLE_RATE, PCM16_SAMPLE_RATE

__all__ = [
    "FORMAT_RATES",
    "Resampler",
    "alaw_decode",
    "alaw_encode",
    "decode",
    "duration_ms",
    "encode",
    "float_to_pcm16",
    "pcm16_to_float",
    "read_wav",
    "resample",
    "resample_pcm16",
    "split_frames",
    "ulaw_decode",
    "ulaw_encode",
    "wav_bytes",
    "write_wav",
]

FORMAT_RATES: dict[str, int] = {"pcm16": PCM16_SAMPLE_RATE, "g711_ulaw": G711_SAMPLE_RATE,
                                "g711_alaw": G711_SAMPLE_RATE}  # protocols.md §6.6
_INT16_SCALE = 32768.0


# --- pcm16 <-> float ---------------------------------------------------------------------------
def pcm16_to_float(pcm: bytes | bytearray | memoryview) -> NDArray[np.float32]:
    """Signed 16-bit little-endian PCM to float32 in [-1, 1)."""
    if len(pcm) % 2:
        raise ValueError(f"pcm16 needs an even number of bytes; got {len(pcm)}")
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / np.float32(_INT16_SCALE)


def float_to_pcm16(samples: ArrayLike) -> bytes:
    """Float samples in [-1, 1] to pcm16 bytes: rounded to nearest, clipped rather than wrapped."""
    scaled = np.rint(np.asarray(samples, dtype=np.float64) * _INT16_SCALE)
    return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()


def _as_int16(samples: ArrayLike | bytes) -> NDArray[np.int16]:
    if isinstance(samples, bytes | bytearray | memoryview):
        return np.frombuffer(samples, dtype="<i2").astype(np.int16)
    return np.asarray(samples, dtype=np.int16)


def _as_codes(data: ArrayLike | bytes) -> NDArray[np.uint8]:
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    return np.asarray(data, dtype=np.uint8)


# --- G.711 -------------------------------------------------------------------------------------
# Segment end points (ITU-T G.711 tables 1a/2a, in 14-bit µ-law and 13-bit A-law magnitudes)
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)
_ULAW_BIAS, _ULAW_CLIP = 0x84, 8159  # bias in 16-bit units; clip in 14-bit units


def _ulaw_encode_all() -> NDArray[np.uint8]:
    """The code of every int16 value (index: value as uint16), so encoding is one table look-up."""
    pcm = np.arange(-32768, 32768, dtype=np.int32) >> 2  # 14-bit, arithmetic shift as in C
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(pcm), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, magnitude, side="left")
    code = np.where(seg >= 8, 0x7F, (seg << 4) | ((magnitude >> (seg + 1)) & 0xF))  # 8: clipped
    return np.roll((code ^ mask).astype(np.uint8), -32768)  # reorder so index = uint16 view


def _alaw_encode_all() -> NDArray[np.uint8]:
    pcm = np.arange(-32768, 32768, dtype=np.int32) >> 3  # 13-bit
    negative = pcm < 0
    mask = np.where(negative, 0x55, 0xD5)  # even-bit inversion; sign bit set for positive
    magnitude = np.where(negative, -pcm - 1, pcm)
    seg = np.searchsorted(_ALAW_SEG_END, magnitude, side="left")
    quant = np.where(seg < 2, magnitude >> 1, magnitude >> np.maximum(seg, 1)) & 0xF
    code = np.where(seg >= 8, 0x7F, (seg << 4) | quant)
    return np.roll((code ^ mask).astype(np.uint8), -32768)


def _ulaw_decode_all() -> NDArray[np.int16]:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((code & 0x0F) << 3) + _ULAW_BIAS) << ((code & 0x70) >> 4)
    return np.where(code & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def _alaw_decode_all() -> NDArray[np.int16]:
    code = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (code & 0x70) >> 4
    t = (code & 0x0F) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(code & 0x80, t, -t).astype(np.int16)


_tables: dict[str, Callable[[], NDArray[Any]]] = {
    "ulaw_enc": cache(_ulaw_encode_all), "alaw_enc": cache(_alaw_encode_all),
    "ulaw_dec": cache(_ulaw_decode_all), "alaw_dec": cache(_alaw_decode_all)}


def ulaw_encode(samples: ArrayLike | bytes) -> NDArray[np.uint8]:
    """G.711 µ-law codes of int16 samples (or pcm16 bytes); encode(0) is 0xFF."""
    return _tables["ulaw_enc"]()[_as_int16(samples).view(np.uint16)]


def ulaw_decode(codes: ArrayLike | bytes) -> NDArray[np.int16]:
    """int16 samples of G.711 µ-law codes."""
    return _tables["ulaw_dec"]()[_as_codes(codes)]


def alaw_encode(samples: ArrayLike | bytes) -> NDArray[np.uint8]:
    """G.711 A-law codes of int16 samples (or pcm16 bytes); encode(0) is 0xD5."""
    return _tables["alaw_enc"]()[_as_int16(samples).view(np.uint16)]


def alaw_decode(codes: ArrayLike | bytes) -> NDArray[np.int16]:
    """int16 samples of G.711 A-law codes."""
    return _tables["alaw_dec"]()[_as_codes(codes)]


_ENCODERS = {"g711_ulaw": ulaw_encode, "g711_alaw": alaw_encode}
_DECODERS = {"g711_ulaw": ulaw_decode, "g711_alaw": alaw_decode}


def _check_format(fmt: str) -> None:
    if fmt not in AUDIO_FORMATS:
        raise ValueError(f"audio format must be one of {', '.join(AUDIO_FORMATS)}; got {fmt!r}")


def encode(pcm16: bytes, fmt: str) -> bytes:
    """pcm16 bytes in a realtime audio format (`pcm16` passes through; no resampling here)."""
    _check_format(fmt)
    return bytes(pcm16) if fmt == "pcm16" else _ENCODERS[fmt](pcm16).tobytes()


def decode(data: bytes, fmt: str) -> bytes:
    """Bytes of a realtime audio format as pcm16 bytes (same rate)."""
    _check_format(fmt)
    return bytes(data) if fmt == "pcm16" else _DECODERS[fmt](data).astype("<i2").tobytes()


# --- resampling --------------------------------------------------------------------------------
_ZERO_CROSSINGS = 16  # per side: ~2 x 16 taps at the lower rate, transition band ~6 % of Nyquist
_ROLLOFF = 0.94  # cutoff as a fraction of the lower Nyquist: room for the transition band
_KAISER_BETA = 8.6  # ~ -90 dB side lobes
_BLOCK = 4096  # outputs per gather, to bound memory on long inputs


@cache
def _polyphase(up: int, down: int) -> tuple[NDArray[np.float64], int]:
    """Windowed-sinc taps per output phase: row p weights the inputs around t = floor + p/up.

    Returns the (up, K) table and the number of taps left of the output time (incl. floor).
    """
    cutoff = _ROLLOFF * min(1.0, up / down)  # in units of the input Nyquist
    half = _ZERO_CROSSINGS / cutoff  # half-width in input samples
    left = math.ceil(half)  # taps j = floor - left + 1 .. floor + left
    offsets = np.arange(-left + 1, left + 1, dtype=np.float64)  # input index minus floor
    tau = np.arange(up, dtype=np.float64)[:, None] / up - offsets[None, :]  # t - k
    window = np.i0(_KAISER_BETA * np.sqrt(np.clip(1.0 - (tau / half) ** 2, 0.0, None))) / np.i0(_KAISER_BETA)
    taps = cutoff * np.sinc(cutoff * tau) * np.where(np.abs(tau) <= half, window, 0.0)
    return taps / taps.sum(axis=1, keepdims=True), left  # unit DC gain for every phase


class Resampler:
    """Streaming band-limited resampler (polyphase windowed sinc) for mono float samples.

    Why stateful: audio arrives as 10-20 ms frames; resampling each alone would click at every
    frame edge. Feed frames to `process` and call `flush` once at the end; the concatenated
    output equals `resample` of the whole signal. Output n sits at input time n * from/to, so
    delay is zero and a signal of N samples gives ceil(N * to / from) samples.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError(f"sample rates must be positive; got {from_rate} -> {to_rate}")
        g = math.gcd(int(from_rate), int(to_rate))
        self.from_rate, self.to_rate = int(from_rate), int(to_rate)
        self._up, self._down = self.to_rate // g, self.from_rate // g
        self._taps, self._left = _polyphase(self._up, self._down)
        self._buf = np.zeros(self._left, dtype=np.float64)  # leading zeros: inputs before time 0
        self._buf_start = -self._left  # absolute input index of _buf[0]
        self._received = 0  # input samples so far
        self._next = 0  # index of the next output sample

    def process(self, samples: ArrayLike) -> NDArray[np.float32]:
        """Resample the next chunk; returns every output whose inputs have all arrived."""
        chunk = np.asarray(samples, dtype=np.float64).reshape(-1)
        self._buf = np.concatenate([self._buf, chunk])
        self._received += chunk.size
        # output n needs inputs up to floor(n * down / up) + left
        last = (self._received - self._left) * self._up // self._down  # first n that is not ready
        return self._emit(max(last, self._next))

    def flush(self) -> NDArray[np.float32]:
        """The remaining outputs, reading zeros past the end; the resampler is then spent."""
        end = -(-self._received * self._up // self._down)  # ceil(N * up / down)
        self._buf = np.concatenate([self._buf, np.zeros(self._left + 1)])
        return self._emit(max(end, self._next))

    def _emit(self, stop: int) -> NDArray[np.float32]:
        outs = []
        for start in range(self._next, stop, _BLOCK):
            n = np.arange(start, min(stop, start + _BLOCK), dtype=np.int64)
            pos = n * self._down
            floor, phase = pos // self._up, pos % self._up
            first = floor - self._left + 1 - self._buf_start  # index into _buf of the first tap
            idx = first[:, None] + np.arange(self._taps.shape[1])[None, :]
            outs.append(np.einsum("ij,ij->i", self._buf[idx], self._taps[phase]))
        self._next = stop
        # keep only what later outputs can still need
        keep_from = (self._next * self._down) // self._up - self._left + 1 - self._buf_start
        if keep_from > 0:
            self._buf, self._buf_start = self._buf[keep_from:], self._buf_start + keep_from
        return np.concatenate(outs).astype(np.float32) if outs else np.zeros(0, dtype=np.float32)


def resample(samples: ArrayLike, from_rate: int, to_rate: int) -> NDArray[np.float32]:
    """Mono float samples at `from_rate` as float32 at `to_rate` (band-limited, zero delay)."""
    if from_rate == to_rate:
        return np.asarray(samples, dtype=np.float32).reshape(-1).copy()
    resampler = Resampler(from_rate, to_rate)
    return np.concatenate([resampler.process(samples), resampler.flush()])


def resample_pcm16(pcm: bytes, from_rate: int, to_rate: int) -> bytes:
    """pcm16 bytes at `from_rate` as pcm16 bytes at `to_rate`."""
    if from_rate == to_rate:
        return bytes(pcm)
    return float_to_pcm16(resample(pcm16_to_float(pcm), from_rate, to_rate))


# --- frames ------------------------------------------------------------------------------------
def duration_ms(pcm: bytes, rate: int = PCM16_SAMPLE_RATE) -> float:
    """Length of mono pcm16 audio in milliseconds."""
    return len(pcm) / 2 / rate * 1000.0


def split_frames(pcm: bytes, rate: int = PCM16_SAMPLE_RATE, ms: int = 20, *,
                 pad: bool = False) -> Iterator[bytes]:
    """Mono pcm16 in frames of `ms` milliseconds; the last is shorter unless `pad` fills it with silence."""
    size = rate * ms // 1000 * 2
    if size <= 0:
        raise ValueError(f"a {ms} ms frame at {rate} Hz holds no sample")
    for start in range(0, len(pcm), size):
        frame = bytes(pcm[start:start + size])
        yield frame + b"\x00" * (size - len(frame)) if pad else frame


# --- WAV ---------------------------------------------------------------------------------------
_WAV_DTYPES: dict[int, DTypeLike] = {1: np.uint8, 2: np.dtype("<i2"), 4: np.dtype("<i4")}


def read_wav(source: str | os.PathLike[str] | IO[bytes]) -> tuple[bytes, int]:
    """A PCM WAV file as (mono pcm16 bytes, sample rate): channels averaged, widths 8-32 bit."""
    with wave.open(source if not isinstance(source, os.PathLike) else os.fspath(source), "rb") as wav:
        width, channels, rate = wav.getsampwidth(), wav.getnchannels(), wav.getframerate()
        raw = wav.readframes(wav.getnframes())
    if width == 3:  # 24-bit: widen to 32 by appending a zero low byte
        triples = np.frombuffer(raw, np.uint8).reshape(-1, 3)
        samples = np.pad(triples, ((0, 0), (1, 0))).copy().view("<i4").reshape(-1).astype(np.float64) / 2**31
    elif width in _WAV_DTYPES:
        data = np.frombuffer(raw, _WAV_DTYPES[width]).astype(np.float64)
        samples = (data - 128) / 128 if width == 1 else data / 2 ** (8 * width - 1)
    else:
        raise ValueError(f"unsupported WAV sample width: {width} bytes")
    return float_to_pcm16(samples.reshape(-1, channels).mean(axis=1)), rate


def write_wav(target: str | os.PathLike[str] | IO[bytes], pcm: bytes, rate: int = PCM16_SAMPLE_RATE,
              *, channels: int = 1) -> None:
    """Write pcm16 bytes (interleaved when `channels` > 1) as a WAV file."""
    with wave.open(target if not isinstance(target, os.PathLike) else os.fspath(target), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)


def wav_bytes(pcm: bytes, rate: int = PCM16_SAMPLE_RATE, **options: Any) -> bytes:
    """The WAV file of pcm16 bytes, in memory (for IPython.display.Audio, widgets, uploads)."""
    buffer = io.BytesIO()
    write_wav(buffer, pcm, rate, **options)
    return buffer.getvalue()
