"""Peak memory of a long `df.gw.decide` run against the loopback stub: does it stay flat?

    python bench/frames_memory.py                   # 1,000,000 rows x 3 questions
    python bench/frames_memory.py --rows 200000     # a reduced run

RSS is sampled every 0.25 s from /proc while the run goes. "Growth beyond the frames" is the peak
RSS minus the RSS before the run (input frame already built) minus the result frame's own size: what
the runner itself holds. The goal is at most 50 MB per 100k rows, and a flat curve over the run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
from frames_throughput import MODEL, QUESTIONS, start_stub, texts

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway

MB = 1024 * 1024


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        started = time.perf_counter()
        while not self.done.wait(0.25):
            self.samples.append((time.perf_counter() - started, rss()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.002)
    parser.add_argument("--checkpoint", action="store_true", help="also write every answer to SQLite")
    args = parser.parse_args()
    process, url = start_stub(args.latency)
    try:
        frame = pd.DataFrame({"text": texts(args.rows)})
        input_bytes = frame.memory_usage(deep=True).sum()
        with Gateway(url, "bench-key") as gw, tempfile.TemporaryDirectory() as tmp:
            frame.head(100).gw.decide("{text}", QUESTIONS, model=MODEL, gateway=gw, checkpoint=None,
                                      progress=False)
            before = rss()
            sampler = Sampler()
            sampler.start()
            started = time.perf_counter()
            out = frame.gw.decide("{text}", QUESTIONS, model=MODEL, gateway=gw, concurrency=args.concurrency,
                                  checkpoint=Path(tmp) / "c.sqlite" if args.checkpoint else None,
                                  progress=False, join=False)
            elapsed = time.perf_counter() - started
            sampler.done.set()
            sampler.join()
    finally:
        process.terminate()
        process.wait()
    assert out["__error"].isna().all() and out.run.sent == args.rows
    output_bytes = out.memory_usage(deep=True).sum()
    peak = max(r for _, r in sampler.samples)
    growth = peak - before - output_bytes
    per_100k = growth / (args.rows / 100_000)
    print(f"\n{args.rows} rows x {len(QUESTIONS)} questions against the stub (L={args.latency * 1000:.0f} ms, "
          f"C={args.concurrency}), checkpoint {'on' if args.checkpoint else 'off'}: "
          f"{args.rows / elapsed:.0f} rows/s, {elapsed:.0f} s\n")
    print("| measure | MB |")
    print("|---|---:|")
    print(f"| input frame (deep) | {input_bytes / MB:.0f} |")
    print(f"| RSS before the run | {before / MB:.0f} |")
    print(f"| peak RSS during the run | {peak / MB:.0f} |")
    print(f"| result frame (deep) | {output_bytes / MB:.0f} |")
    print(f"| growth beyond the frames | {growth / MB:.0f} |")
    print(f"| growth per 100k rows | {per_100k / MB:.1f} |")
    print("\nRSS over the run (MB above the start):",
          ", ".join(f"{p:.0%}: {(r - before) / MB:.0f}" for p, r in _quantiles(sampler.samples)))


def _quantiles(samples: list[tuple[float, int]]) -> list[tuple[float, int]]:
    if not samples:
        return []
    end = samples[-1][0]
    picks = []
    for share in (0.1, 0.25, 0.5, 0.75, 1.0):
        picks.append((share, next(r for t, r in samples if t >= share * end - 1e-9)))
    return picks


if __name__ == "__main__":
    main()
