"""Spoken turns over the WebSocket: espeak-ng asks, the server's VAD ends the turn, Whisper hears it, the
answer comes back as text and speech, and Whisper reads that speech back."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import pytest

from gwlab.wire.realtime import audio
from tests.support.realtime import b64, connect, overlap, silence, speaks, spoken, types, words

pytestmark = pytest.mark.slow

CHUNK_MS = 100
SPOKEN_TURN = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
               "input_audio_buffer.committed", "conversation.item.created"]
AUDIO_END = ["response.audio.done", "response.audio_transcript.done", "response.content_part.done",
             "response.output_item.done", "response.done", "rate_limits.updated"]


async def stream(rt, pcm: bytes, rate: int = 24_000, fmt: str = "pcm16", pace: float = 0.25) -> None:
    """Send audio in 100 ms chunks, at `pace` times real time per chunk (a microphone, only faster)."""
    step = rate * CHUNK_MS // 1000 * 2
    for start in range(0, len(pcm), step):
        chunk = audio.encode(pcm[start:start + step], fmt)
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(chunk)})
        await asyncio.sleep(CHUNK_MS / 1000 * pace)


async def test_full_spoken_turn_is_heard_answered_and_spoken_back(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {
            "modalities": ["text", "audio"], "input_audio_transcription": {"model": "whisper-1"},
            "temperature": 0, "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}})
        await rt.until("session.updated")
        await stream(rt, silence(300) + spoken("What is the capital of France?") + silence(1200))
        events = await rt.until("rate_limits.updated")

    kinds = types(events)
    assert kinds[:4] == SPOKEN_TURN and kinds[-6:] == AUDIO_END and "error" not in kinds
    started, stopped = events[0], events[1]
    assert started["item_id"] == stopped["item_id"] == events[2]["item_id"] == events[3]["item"]["id"]
    assert 0 <= started["audio_start_ms"] < stopped["audio_end_ms"]
    user_item = events[3]["item"]
    assert user_item["role"] == "user" and user_item["content"][0]["type"] == "input_audio"

    heard = next(e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert heard["item_id"] == user_item["id"] and {"capital", "france"} <= words(heard["transcript"])

    part = next(e for e in events if e["type"] == "response.content_part.added")["part"]
    assert part == {"type": "audio", "transcript": ""}
    transcript = "".join(e["delta"] for e in events if e["type"] == "response.audio_transcript.delta")
    assert transcript.strip() and events[-5]["transcript"] == transcript
    speech = b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.audio.delta")
    assert len(speech) % 2 == 0 and len(speech) > 9_600  # more than 0.2 s of pcm16 at 24 kHz
    done = events[-2]["response"]
    assert done["status"] == "completed" and done["modalities"] == ["text", "audio"]
    assert done["output"][0]["content"] == [{"type": "audio", "transcript": transcript}]
    # the speech says what the transcript says
    assert speaks(transcript, speech, 24_000) >= 0.5


@pytest.mark.parametrize(("fmt_in", "fmt_out"), [("g711_ulaw", "g711_alaw"), ("g711_alaw", "g711_ulaw")])
async def test_g711_in_and_out_with_manual_commit(gateway, fmt_in: str, fmt_out: str) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {
            "input_audio_format": fmt_in, "output_audio_format": fmt_out, "turn_detection": None,
            "modalities": ["audio", "text"], "voice": "alloy", "input_audio_transcription": {"model": "x"},
            "max_response_output_tokens": 24, "temperature": 0}})  # greedy: the same short answer each run
        await rt.until("session.updated")
        await stream(rt, spoken("What is the capital of France?", rate=8_000), rate=8_000, fmt=fmt_in, pace=0)
        await rt.send({"type": "input_audio_buffer.commit"})
        committed = await rt.until("conversation.item.created")
        assert types(committed) == ["input_audio_buffer.committed", "conversation.item.created"]
        heard = (await rt.until("conversation.item.input_audio_transcription.completed"))[-1]["transcript"]
        # 8 kHz G.711 speech through Whisper tiny.en is telephone quality: a wrong decode gives noise or
        # nothing, a right one keeps some of the spoken words (a run heard 1 of 6 words)
        assert overlap("What is the capital of France?", heard) > 0
        await rt.send({"type": "response.create"})
        events = await rt.until("rate_limits.updated")
    codes = b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.audio.delta")
    assert codes and events[-2]["response"]["output_audio_format"] == fmt_out
    pcm = audio.decode(codes, fmt_out)  # one byte per sample at 8 kHz
    transcript = events[-2]["response"]["output"][0]["content"][0]["transcript"]
    assert speaks(transcript, pcm, 8_000, fmt=fmt_out) >= 0.5


async def test_speech_during_a_response_cancels_it(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {
            "modalities": ["text", "audio"], "max_response_output_tokens": 4096,
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 400}}})
        await rt.until("session.updated")
        question = spoken("Tell me a very long story about a dragon and a knight.")
        await stream(rt, question + silence(700), pace=0)
        await rt.until("response.created")
        await stream(rt, spoken("Stop, stop.") + silence(100), pace=0)
        events = await rt.until("response.done")
        assert "input_audio_buffer.speech_started" in types(events)
        done = events[-1]["response"]
        assert done["status"] == "cancelled"
        assert done["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
        assert all(item["status"] == "incomplete" for item in done["output"])


async def test_commit_of_less_than_100_ms_is_refused_and_the_audio_kept(gateway) -> None:
    async with connect(gateway) as rt:
        await rt.send({"type": "session.update", "session": {"turn_detection": None}})
        await rt.until("session.updated")
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(50))})
        await rt.send({"type": "input_audio_buffer.commit", "event_id": "short"})
        error = (await rt.recv())["error"]
        assert (error["code"], error["event_id"]) == ("input_audio_buffer_commit_empty", "short")
        await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(60))})
        await rt.send({"type": "input_audio_buffer.commit"})
        assert (await rt.recv())["type"] == "input_audio_buffer.committed"  # 50 + 60 ms: enough now


async def test_truncate_cuts_the_assistant_audio_and_its_transcript(gateway) -> None:
    async with connect(gateway) as rt:
        events = await rt.turn("Say something about the sea.", modalities=["text", "audio"])
        item = events[-2]["response"]["output"][0]
        await rt.send({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0,
                       "audio_end_ms": 300})
        truncated = await rt.recv()
        assert (truncated["type"], truncated["item_id"], truncated["audio_end_ms"]) == (
            "conversation.item.truncated", item["id"], 300)
        await rt.send({"type": "conversation.item.retrieve", "item_id": item["id"]})
        part = (await rt.recv())["item"]["content"][0]
        assert len(base64.b64decode(part["audio"])) == 300 * 48 and part["transcript"] == ""
        await rt.send({"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0,
                       "audio_end_ms": 60_000, "event_id": "too_far"})
        assert (await rt.recv())["error"]["param"] == "audio_end_ms"


async def test_appended_audio_without_speech_starts_no_turn(gateway) -> None:
    async with connect(gateway) as rt:
        noise = (np.random.default_rng(0).normal(0, 30, 24_000 * 2)).astype("<i2").tobytes()  # ~-60 dBFS
        await stream(rt, noise, pace=0)
        await rt.send({"type": "input_audio_buffer.clear"})
        assert types(await rt.until("input_audio_buffer.cleared")) == ["input_audio_buffer.cleared"]
