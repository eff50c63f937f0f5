"""SSE decoding throughput: gwlab's decoder against the openai SDK's and httpx-sse's, same bytes.

Run: .venv/bin/python bench/sse_decode.py [--mb 50] [--repeat 3]

One stream of realistic chat-completion chunks (about 50 MB) is cut two ways: one event per chunk
(a streaming server flushes each event) and 64 KiB chunks (a fast loopback read). Every decoder
sees the same chunks and must yield the same number of events; the decoders take turns and the
best of `--repeat` runs counts.
"""

from __future__ import annotations

import argparse
import codecs
import json
import time
from collections.abc import Callable, Iterable

from httpx_sse._decoders import SSEDecoder as HttpxSseDecoder
from httpx_sse._decoders import SSELineDecoder as HttpxSseLineDecoder
from openai._streaming import SSEDecoder as OpenAISSEDecoder

from gwlab.wire.sse import SSEDecoder

WORDS = ["The", " gateway", " streams", " tokens", " as", " they", " arrive", ",", " each", " one",
         " a", " chunk", " of", " JSON", " — ", "déjà", " vu", " 東京", " ✓", "."]


def make_stream(megabytes: float) -> list[bytes]:
    """Chat chunks as protocols.md §2.4 shows them, one event per element, until `megabytes`."""
    target = int(megabytes * 1_000_000)
    events: list[bytes] = []
    size, i = 0, 0
    head = {"id": "chatcmpl-gwbench", "object": "chat.completion.chunk", "created": 1767225600,
            "model": "local/gemma-3-270m", "system_fingerprint": "fp_gw"}
    while size < target:
        delta = {"role": "assistant", "content": ""} if i == 0 else {"content": WORDS[i % len(WORDS)]}
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}],
                 "usage": None}
        event = b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
        events.append(event)
        size += len(event)
        i += 1
    events.append(b"data: [DONE]\n\n")
    return events


def rechunk(events: list[bytes], size: int) -> list[bytes]:
    blob = b"".join(events)
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def run_gwlab(chunks: Iterable[bytes]) -> int:
    decoder = SSEDecoder()
    n = 0
    for chunk in chunks:
        n += len(decoder.feed(chunk))
    return n + len(decoder.close())


def run_openai(chunks: Iterable[bytes]) -> int:
    return sum(1 for _ in OpenAISSEDecoder().iter_bytes(iter(chunks)))


def run_httpx_sse(chunks: Iterable[bytes]) -> int:
    # what httpx_sse.EventSource.iter_sse does over response.iter_text()
    text_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines, decoder = HttpxSseLineDecoder(), HttpxSseDecoder()
    n = 0
    for chunk in chunks:
        for line in lines.decode(text_decoder.decode(chunk)):
            if decoder.decode(line.rstrip("\n")) is not None:
                n += 1
    for line in lines.flush():
        if decoder.decode(line.rstrip("\n")) is not None:
            n += 1
    return n


def best_times(decoders: dict[str, Callable[[list[bytes]], int]], chunks: list[bytes], repeat: int,
               expected: int) -> dict[str, float]:
    """Best time per decoder; the decoders take turns, so a burst of noise cannot hit one alone."""
    best = dict.fromkeys(decoders, float("inf"))
    for _ in range(repeat):
        for name, fn in decoders.items():
            start = time.perf_counter()
            count = fn(chunks)
            best[name] = min(best[name], time.perf_counter() - start)
            assert count == expected, (name, count, expected)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    events = make_stream(args.mb)
    total = sum(map(len, events))
    print(f"stream: {total / 1e6:.1f} MB, {len(events)} events")
    decoders = {"gwlab": run_gwlab, "openai": run_openai, "httpx-sse": run_httpx_sse}
    for label, chunks in (("one event per chunk", events), ("64 KiB chunks", rechunk(events, 65536))):
        times = best_times(decoders, chunks, args.repeat, len(events))
        print(f"\n{label}:")
        for name, seconds in times.items():
            print(f"  {name:10s} {total / 1e6 / seconds:8.1f} MB/s  ({seconds:.2f} s)")
        for peer in ("openai", "httpx-sse"):
            print(f"  gwlab vs {peer}: {times[peer] / times['gwlab']:.1f}x faster")


if __name__ == "__main__":
    main()
