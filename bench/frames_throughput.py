"""Rows per second of `df.gw.decide` against a stub gateway with a fixed latency, and tokens per row.

    python bench/frames_throughput.py                       # 10,000 rows x 3 questions, C=32, L=50 ms
    python bench/frames_throughput.py --rows 2000 --skip-local

Part 1 (loopback stub, bench/frames_stub.py, a subprocess): rows/s of
  - gwlab: `df.gw.decide(...)` without a checkpoint and with a SQLite checkpoint (a new file each round,
    so every answer is written; the checkpoint's cost is the gap between the two),
  - a hand-written AsyncOpenAI + asyncio.Semaphore(C) loop building the same tidy columns (the openai
    SDK has no decisions resource, so the loop posts through the client's generic `post`),
  - the same loop on a bare httpx.AsyncClient (the SDK's own overhead taken out),
  - the floor: C raw asyncio sockets writing HTTP/1.1 by hand (what the stub and machine allow),
  - a naive sequential loop (httpx.Client), on a subset, since it needs rows x L seconds,
as a fraction of the ideal C / L and as ratios to one another.
Part 2 (the real embedded gateway): input tokens per row with the three questions packed in one
request, against one request per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)
from gwlab.client.gateway import Gateway
from gwlab.frames.store.checkpoint import Checkpoint

HERE = Path(__file__).parent
MODEL = "local/decide-e5-small"
PEER = "AsyncOpenAI + semaphore (hand-written)"
CHECKPOINTED = "gwlab, with a SQLite checkpoint"
RAW = "raw sockets, HTTP written by hand (the floor)"
QUESTIONS = {k: v for k, v in json.loads((HERE / "data" / "decisions_questions.json").read_text()).items()
             if k in ("urgent", "team", "severity")}


def start_stub(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(HERE / "frames_stub.py"), "--latency", str(latency)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    for _ in range(100):  # the socket is bound before the URL is printed; wait until it answers
        try:
            httpx.get(url.removesuffix("/v1") + "/", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return process, url


def texts(rows: int) -> list[str]:
    labelled = [json.loads(line)["text"] for line in (HERE / "data" / "decisions_labelled.jsonl").open()]
    return [f"#{i} {labelled[i % len(labelled)]}" for i in range(rows)]  # distinct: no dedupe helps


def flatten(data: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns, written by hand as a user would."""
    record: dict[str, Any] = {}
    for q, answer in data["answers"].items():
        for key in ("noul", "choice", "score", "confidence"):
            if key in answer:
                record[f"{q}__{key}"] = answer[key]
        for option, p in (answer.get("probabilities") or {}).items():
            record[f"{q}__p__{option}"] = p
    record["__input_tokens"] = data["usage"]["input_tokens"]
    return record


async def hand_written(url: str, rows: list[str], concurrency: int) -> pd.DataFrame:
    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, headers={"authorization": "Bearer bench"},
                                 timeout=60) as client:
        async def one(text: str) -> dict[str, Any]:
            async with semaphore:
                response = await client.post("/decisions", json={"model": MODEL, "state": text,
                                                                 "questions": QUESTIONS})
                response.raise_for_status()
                return flatten(response.json())

        records = await asyncio.gather(*(one(t) for t in rows))
    return pd.DataFrame.from_records(records)


async def openai_loop(url: str, rows: list[str], concurrency: int) -> pd.DataFrame:
    from openai import AsyncOpenAI

    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with AsyncOpenAI(base_url=url, api_key="bench", max_retries=2, timeout=60,
                           http_client=httpx.AsyncClient(limits=limits)) as client:
        async def one(text: str) -> dict[str, Any]:
            async with semaphore:
                data = await client.post("/decisions", cast_to=object,
                                         body={"model": MODEL, "state": text, "questions": QUESTIONS})
                return flatten(data)

        records = await asyncio.gather(*(one(t) for t in rows))
    return pd.DataFrame.from_records(records)


async def raw_loop(url: str, rows: list[str], concurrency: int) -> pd.DataFrame:
    """The floor: C keep-alive sockets writing HTTP/1.1 by hand, no HTTP library, no retries, no checks.

    Nothing a real client can ship (no errors, timeouts or pooling), only what the stub and this machine
    allow: the fraction of C/L it reaches is the ceiling every client in this run is under.
    """
    host, port = httpx.URL(url).host, httpx.URL(url).port
    path = httpx.URL(url).path.rstrip("/").encode() + b"/decisions"
    pending = iter(rows)
    records: list[dict[str, Any]] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        for text in pending:
            body = json.dumps({"model": MODEL, "state": text, "questions": QUESTIONS}).encode()
            writer.write(b"POST %s HTTP/1.1\r\nhost: stub\r\nauthorization: Bearer bench\r\n"
                         b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (path, len(body), body))
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            records.append(flatten(json.loads(await reader.readexactly(length))))
        writer.close()
        await writer.wait_closed()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return pd.DataFrame.from_records(records)


def sequential(url: str, rows: list[str]) -> pd.DataFrame:
    with httpx.Client(base_url=url, headers={"authorization": "Bearer bench"}, timeout=60) as client:
        records = []
        for text in rows:
            response = client.post("/decisions", json={"model": MODEL, "state": text, "questions": QUESTIONS})
            response.raise_for_status()
            records.append(flatten(response.json()))
    return pd.DataFrame.from_records(records)


def timed(fn: Any, *args: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, all threads, result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def stub_part(args: argparse.Namespace) -> None:
    process, url = start_stub(args.latency)
    rows, c = args.rows, args.concurrency
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def note(name: str, seconds: float, cpu_seconds: float, n: int) -> None:
        wall.setdefault(name, []).append(n / seconds)
        cpu.setdefault(name, []).append(cpu_seconds / n * 1e6)

    try:
        frame = pd.DataFrame({"text": texts(rows)})
        with Gateway(url, "bench-key") as gw:
            def gwlab_run(checkpoint: Path | None = None) -> Any:
                return frame.gw.decide("{text}", QUESTIONS, model=MODEL, gateway=gw, concurrency=c,
                                       checkpoint=checkpoint, progress=False)

            frame.head(200).gw.decide("{text}", QUESTIONS, model=MODEL, gateway=gw, checkpoint=None,
                                      progress=False, concurrency=c)  # warm the pool
            for _ in range(args.rounds):  # the clients take turns, round after round
                seconds, cpu_seconds, out = timed(gwlab_run)
                assert out["__error"].isna().all() and out.run.sent == rows
                note("gwlab df.gw.decide", seconds, cpu_seconds, rows)
                with tempfile.TemporaryDirectory() as tmp:  # a new file each round: every answer written
                    seconds, cpu_seconds, kept = timed(gwlab_run, Path(tmp) / "c.sqlite")
                    with Checkpoint(Path(tmp) / "c.sqlite") as written:
                        assert kept.run.sent == rows and len(written) == rows
                note(CHECKPOINTED, seconds, cpu_seconds, rows)
                seconds, cpu_seconds, hand = timed(
                    lambda: asyncio.run(hand_written(url, list(frame["text"]), c)))
                assert len(hand) == rows
                note("httpx + semaphore (hand-written)", seconds, cpu_seconds, rows)
                seconds, cpu_seconds, hand = timed(
                    lambda: asyncio.run(openai_loop(url, list(frame["text"]), c)))
                assert len(hand) == rows and hand["urgent__noul"].tolist() == out["urgent__noul"].tolist()
                note(PEER, seconds, cpu_seconds, rows)
                seconds, cpu_seconds, hand = timed(lambda: asyncio.run(raw_loop(url, list(frame["text"]), c)))
                assert len(hand) == rows
                note(RAW, seconds, cpu_seconds, rows)
        subset = list(frame["text"].head(args.sequential_rows))
        seconds, cpu_seconds, _ = timed(sequential, url, subset)
        note(f"sequential httpx loop ({len(subset)} rows)", seconds, cpu_seconds, len(subset))
        one_socket = timed(lambda: asyncio.run(raw_loop(url, subset, 1)))[0]
    finally:
        process.terminate()
        process.wait()
    ideal = c / args.latency
    rate = {name: statistics.median(values) for name, values in wall.items()}
    hand_rate = rate[PEER]
    seq_rate = rate[f"sequential httpx loop ({len(subset)} rows)"]
    print(f"\n{rows} rows x {len(QUESTIONS)} questions, concurrency C={c}, stub latency "
          f"L={args.latency * 1000:.0f} ms, ideal C/L = {ideal:.0f} rows/s, median of {args.rounds} "
          f"alternating rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| client | rows/s | of C/L | vs AsyncOpenAI loop | vs sequential | client CPU per row |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, value in rate.items():
        print(f"| {name} | {value:.0f} | {value / ideal:.2f} | {value / hand_rate:.2f}x | "
              f"{value / seq_rate:.1f}x | {statistics.median(cpu[name]):.0f} µs |")
    bare, kept = rate["gwlab df.gw.decide"], rate[CHECKPOINTED]
    floor = rate[RAW]
    print(f"\nthe checkpoint's cost: {1 - kept / bare:.1%} of the bare rate (goal <= 2 %); "
          f"of C/L: bare {bare / ideal:.2f} (goal 0.97), checkpointed {kept / ideal:.2f} (goal 0.95); "
          f"the raw-socket floor reaches {floor / ideal:.2f} of C/L, so of what this stub and machine allow: "
          f"bare {bare / floor:.2f}, checkpointed {kept / floor:.2f}")
    alone = (("the sequential httpx loop", 1 / seq_rate), ("one raw socket", one_socket / len(subset)))
    for name, per_request in alone:
        print(f"one request in flight, {name}: {args.latency / per_request:.3f} of 1/L, "
              f"{(per_request - args.latency) * 1000:.1f} ms over L per request with nothing queued")
    print("rounds (rows/s):", "; ".join(f"{name}: {', '.join(f'{v:.0f}' for v in values)}"
                                       for name, values in wall.items()))


def local_part(args: argparse.Namespace) -> None:
    from gwlab import local

    server = local.start()
    try:
        frame = pd.DataFrame({"text": texts(args.local_rows)})
        with Gateway(server.base_url, server.api_key) as gw:
            common = {"model": MODEL, "gateway": gw, "checkpoint": None, "progress": False}
            packed = frame.gw.decide("{text}", QUESTIONS, **common)
            single = [frame.gw.decide("{text}", {q: spec}, **common) for q, spec in QUESTIONS.items()]
    finally:
        server.stop()
    per_row_packed = packed["__input_tokens"].astype(float).mean()
    per_row_single = sum(s["__input_tokens"].astype(float).mean() for s in single)
    print(f"\nreal local gateway ({MODEL}), {args.local_rows} rows of bench/data, questions "
          f"{', '.join(QUESTIONS)}\n")
    print("| requests per row | input tokens per row | requests |")
    print("|---|---:|---:|")
    print(f"| 1 (3 questions packed) | {per_row_packed:.1f} | {args.local_rows} |")
    print(f"| 3 (one per question) | {per_row_single:.1f} | {3 * args.local_rows} |")
    print(f"\npacking saves {1 - per_row_packed / per_row_single:.0%} of input tokens "
          f"(the state is billed once instead of three times)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05, help="stub latency in seconds")
    parser.add_argument("--sequential-rows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--local-rows", type=int, default=60)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-stub", action="store_true")
    args = parser.parse_args()
    if not args.skip_stub:
        stub_part(args)
    if not args.skip_local:
        local_part(args)


if __name__ == "__main__":
    main()
