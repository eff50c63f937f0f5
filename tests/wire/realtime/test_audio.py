"""Audio helpers of the realtime wire: G.711 bit-exact, pcm16 round trips, resampling quality, WAV."""

from __future__ import annotations

import io
import warnings
import wave

import numpy as np
import pytest

from gwlab.wire.realtime import audio

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)
RATES = [8000, 16000, 22050, 24000, 44100, 48000]

# Sun reference values (the segment tables of ITU-T G.711); input 16-bit, code as sent on the wire
ULAW_ENCODE = {0: 0xFF, -1: 0x7E, 1: 0xFF, 100: 0xF2, -100: 0x72, 32767: 0x80, -32768: 0x00, 8159 * 4: 0x80}
ULAW_DECODE = {0xFF: 0, 0x7F: 0, 0x80: 32124, 0x00: -32124, 0xF2: 104, 0x72: -104, 0xEF: 132}
ALAW_ENCODE = {0: 0xD5, -1: 0x55, 15: 0xD5, 16: 0xD4, 32767: 0xAA, -32768: 0x2A}
ALAW_DECODE = {0xD5: 8, 0x55: -8, 0xAA: 32256, 0x2A: -32256, 0xD4: 24}


def _audioop():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import audioop
        except ImportError:  # pragma: no cover  (removed in Python 3.13)
            return None
    return audioop


def _sine(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 0.5) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)


def _peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


# --- G.711 -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("sample", "code"), ULAW_ENCODE.items())
def test_ulaw_encodes_known_vectors(sample: int, code: int) -> None:
    assert audio.ulaw_encode([sample])[0] == code


@pytest.mark.parametrize(("code", "sample"), ULAW_DECODE.items())
def test_ulaw_decodes_known_vectors(code: int, sample: int) -> None:
    assert audio.ulaw_decode([code])[0] == sample


@pytest.mark.parametrize(("sample", "code"), ALAW_ENCODE.items())
def test_alaw_encodes_known_vectors(sample: int, code: int) -> None:
    assert audio.alaw_encode([sample])[0] == code


@pytest.mark.parametrize(("code", "sample"), ALAW_DECODE.items())
def test_alaw_decodes_known_vectors(code: int, sample: int) -> None:
    assert audio.alaw_decode([code])[0] == sample


def test_g711_matches_audioop_for_every_16_bit_input_and_every_code() -> None:
    audioop = _audioop()
    if audioop is None:  # pragma: no cover
        pytest.skip("audioop is gone (Python >= 3.13); the known vectors above still hold")
    pcm, codes = ALL_INT16.astype("<i2").tobytes(), bytes(range(256))
    assert audio.ulaw_encode(pcm).tobytes() == audioop.lin2ulaw(pcm, 2)
    assert audio.alaw_encode(pcm).tobytes() == audioop.lin2alaw(pcm, 2)
    assert audio.ulaw_decode(codes).astype("<i2").tobytes() == audioop.ulaw2lin(codes, 2)
    assert audio.alaw_decode(codes).astype("<i2").tobytes() == audioop.alaw2lin(codes, 2)


@pytest.mark.parametrize("fmt", ["g711_ulaw", "g711_alaw"])
def test_g711_decode_then_encode_gives_back_every_code(fmt: str) -> None:
    codes = bytes(range(256))
    again = audio.encode(audio.decode(codes, fmt), fmt)
    if fmt == "g711_ulaw":  # 0x7F is "negative zero" and decodes to 0, which encodes as 0xFF
        assert again == codes.replace(b"\x7f", b"\xff")
    else:
        assert again == codes


@pytest.mark.parametrize("fmt", ["g711_ulaw", "g711_alaw"])
def test_g711_round_trip_error_stays_within_the_segment_step(fmt: str) -> None:
    back = np.frombuffer(audio.decode(audio.encode(ALL_INT16.tobytes(), fmt), fmt), "<i2").astype(int)
    original = ALL_INT16.astype(int)
    error = np.abs(back - original)
    inside = np.abs(original) < 32000  # beyond it the top code (±32124 / ±32256) clips
    assert np.all(error[inside] <= np.abs(original[inside]) / 32 + 48)  # half a step, plus truncation
    assert np.all(error[~inside] <= 700)


def test_pcm16_format_passes_through_and_unknown_formats_are_refused() -> None:
    pcm = ALL_INT16[:100].tobytes()
    assert audio.encode(pcm, "pcm16") == pcm == audio.decode(pcm, "pcm16")
    with pytest.raises(ValueError, match="g711_ulaw"):
        audio.encode(pcm, "mp3")


def test_g711_formats_are_8khz_and_pcm16_is_24khz() -> None:
    assert audio.FORMAT_RATES == {"pcm16": 24000, "g711_ulaw": 8000, "g711_alaw": 8000}


# --- pcm16 <-> float -------------------------------------------------------------------------
def test_pcm16_to_float_and_back_is_exact_for_every_sample() -> None:
    pcm = ALL_INT16.astype("<i2").tobytes()
    floats = audio.pcm16_to_float(pcm)
    assert floats.dtype == np.float32 and floats.min() == -1.0 and floats.max() < 1.0
    assert audio.float_to_pcm16(floats) == pcm


def test_float_to_pcm16_clips_instead_of_wrapping() -> None:
    assert np.frombuffer(audio.float_to_pcm16([1.5, -2.0, 1.0]), "<i2").tolist() == [32767, -32768, 32767]


def test_pcm16_with_an_odd_byte_count_is_refused() -> None:
    with pytest.raises(ValueError, match="even"):
        audio.pcm16_to_float(b"\x00\x01\x02")


# --- resampling ------------------------------------------------------------------------------
@pytest.mark.parametrize("to_rate", RATES)
@pytest.mark.parametrize("from_rate", RATES)
def test_resampled_440hz_sine_stays_440hz_with_its_rms(from_rate: int, to_rate: int) -> None:
    out = audio.resample(_sine(440, from_rate), from_rate, to_rate)
    assert len(out) == to_rate
    assert _peak_hz(out, to_rate) == pytest.approx(440, abs=1.0)
    core = out[to_rate // 10: -to_rate // 10]  # away from the edges, where zeros were read
    assert np.sqrt(np.mean(core.astype(np.float64) ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=1e-3)
    ideal = _sine(440, to_rate)[to_rate // 10: -to_rate // 10]
    assert np.max(np.abs(core - ideal)) < 1e-3


@pytest.mark.parametrize(("from_rate", "to_rate", "tone"), [(48000, 8000, 6000), (24000, 16000, 10000),
                                                            (44100, 22050, 15000)])
def test_tones_above_the_new_nyquist_are_removed_not_aliased(from_rate: int, to_rate: int, tone: int) -> None:
    out = audio.resample(_sine(tone, from_rate), from_rate, to_rate)
    core = out[to_rate // 10: -to_rate // 10]
    assert np.sqrt(np.mean(core.astype(np.float64) ** 2)) < 1e-3  # below -50 dB of the input


@pytest.mark.parametrize(("from_rate", "to_rate"), [(22050, 48000), (48000, 24000), (24000, 8000)])
def test_streaming_in_20ms_frames_equals_resampling_at_once(from_rate: int, to_rate: int) -> None:
    signal = np.random.default_rng(0).uniform(-0.5, 0.5, from_rate // 2 + 7)
    resampler = audio.Resampler(from_rate, to_rate)
    step = from_rate // 50
    pieces = [resampler.process(signal[i:i + step]) for i in range(0, len(signal), step)]
    streamed = np.concatenate([*pieces, resampler.flush()])
    np.testing.assert_array_equal(streamed, audio.resample(signal, from_rate, to_rate))


def test_resample_pcm16_keeps_length_proportional_and_same_rate_is_identity() -> None:
    pcm = audio.float_to_pcm16(_sine(300, 22050, 0.5))
    assert len(audio.resample_pcm16(pcm, 22050, 24000)) == 2 * 12000
    assert audio.resample_pcm16(pcm, 22050, 22050) == pcm


def test_resampler_refuses_a_zero_rate() -> None:
    with pytest.raises(ValueError, match="positive"):
        audio.Resampler(0, 24000)


# --- frames ----------------------------------------------------------------------------------
def test_split_frames_cuts_20ms_frames_and_pads_the_last_only_when_asked() -> None:
    pcm = bytes(range(256)) * 20  # 5120 bytes = 2560 samples at 24 kHz: 106.7 ms
    frames = list(audio.split_frames(pcm, 24000, 20))
    assert [len(f) for f in frames] == [960] * 5 + [320]
    assert b"".join(frames) == pcm
    padded = list(audio.split_frames(pcm, 24000, 20, pad=True))
    assert len(padded[-1]) == 960 and padded[-1].endswith(b"\x00" * 640)
    assert audio.duration_ms(pcm, 24000) == pytest.approx(106.667, abs=1e-3)


# --- WAV -------------------------------------------------------------------------------------
def test_wav_round_trip_keeps_samples_and_rate(tmp_path) -> None:
    pcm = ALL_INT16[::7].astype("<i2").tobytes()
    path = tmp_path / "a.wav"
    audio.write_wav(path, pcm, 16000)
    assert audio.read_wav(path) == (pcm, 16000)
    assert audio.read_wav(io.BytesIO(audio.wav_bytes(pcm, 8000))) == (pcm, 8000)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_read_wav_downmixes_stereo_of_any_width_to_mono_pcm16(width: int) -> None:
    left = np.full(100, 0.5)
    right = np.full(100, 0.25)
    stereo = np.stack([left, right], axis=1).reshape(-1)
    if width == 1:
        raw = (stereo * 128 + 128).astype(np.uint8).tobytes()
    else:
        ints = (stereo * 2 ** (8 * width - 1)).astype("<i4")
        raw = b"".join(int(v).to_bytes(width, "little", signed=True) for v in ints)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(width)
        wav.setframerate(22050)
        wav.writeframes(raw)
    buffer.seek(0)
    pcm, rate = audio.read_wav(buffer)
    assert rate == 22050
    assert np.frombuffer(pcm, "<i2").tolist() == [round(0.375 * 32768)] * 100
