"""Provider batch jobs: how fast gwlab builds, submits, collects and reads them, and what memory they take.

    python bench/batch.py                     # 10,000 and 50,000 rows
    python bench/batch.py --rows 2000         # a quick run
    python bench/batch.py --client-only --repeats 7   # build and parse alone (no gateway), median of 7 runs

Four figures per size, each beside its trivial baseline:
- build: rows/s of turning (custom_id, body) pairs into the JSONL input file (`wire.batches`), beside a
  bare `json.dumps` per line; the client must not be the bottleneck (goal >= 20,000 rows/s on 2 cores);
- parse: rows/s of collating an output file back to its rows (`wire.batches.collate`), beside bare
  `json.loads` per line;
- submit: rows/s of upload + create against the embedded gateway (`gwlab serve` on loopback);
- collect: rows/s of reading both result files of a terminal job and writing the answers to a
  checkpoint. The gateway is started with `--batch-expire-after 100`: 100 lines are answered by the
  local model and the rest expire at once, so the collection reads a full-size error file without
  waiting hours for a small CPU model to answer 50,000 requests (the model's speed is not what is
  measured here);
- memory: tracemalloc peak of building and collating the rows, per 50,000 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from gwlab.client.gateway import Gateway
from gwlab.local.store import Store
from gwlab.wire.jobs import batches as wb

MODEL = "local/gemma-3-270m"
ENDPOINT = "/v1/chat/completions"


def items(n: int) -> list[tuple[str, dict]]:
    return [(f"{i:064x}", {"model": MODEL, "max_tokens": 4,
                           "messages": [{"role": "user", "content": f"Q: ticket {i}: is it urgent?\nA:"}]})
            for i in range(n)]


def output_file(pairs: list[tuple[str, dict]]) -> bytes:
    lines = []
    for cid, _ in pairs:
        answer = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": MODEL,
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "no"}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}
        lines.append(json.dumps({"id": "r", "custom_id": cid, "error": None,
                                 "response": {"status_code": 200, "request_id": "q", "body": answer}}))
    return ("\n".join(lines[::-1]) + "\n").encode()  # reversed: results are out of order


def rate(n: int, fn, repeats: int = 1, clock=time.perf_counter) -> float:
    """Rows per second: the median of `repeats` timed runs (the machine may be shared and busy). With
    `clock=time.process_time`, per second of this process's own CPU time: what one core does, however
    many other processes share the machine (the wall-clock rate on a loaded machine measures the load)."""
    rates = []
    for _ in range(repeats):
        started = clock()
        fn()
        rates.append(n / max(clock() - started, 1e-9))
    return statistics.median(rates)


def local_rates(n: int, repeats: int = 1) -> dict[str, float]:
    pairs = items(n)
    build = rate(n, lambda: wb.build_openai_jsonl(pairs, ENDPOINT), repeats)
    bare_build = rate(n, lambda: b"".join(json.dumps({"custom_id": c, "method": "POST", "url": ENDPOINT, "body": b})
                                          .encode() + b"\n" for c, b in pairs), repeats)
    data = output_file(pairs)
    ids = [c for c, _ in pairs]
    parse = rate(n, lambda: wb.collate([data], ids), repeats)
    bare_parse = rate(n, lambda: [json.loads(x) for x in data.splitlines()], repeats)
    cpu_build = rate(n, lambda: wb.build_openai_jsonl(pairs, ENDPOINT), repeats, time.process_time)
    cpu_parse = rate(n, lambda: wb.collate([data], ids), repeats, time.process_time)
    tracemalloc.start()
    wb.collate([data], ids)
    wb.build_openai_jsonl(pairs, ENDPOINT)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"build": build, "bare_build": bare_build, "parse": parse, "bare_parse": bare_parse,
            "cpu_build": cpu_build, "cpu_parse": cpu_parse,
            "peak_mb_per_50k": peak / 1e6 * 50_000 / n}


def start_gateway(db: Path) -> tuple[subprocess.Popen[str], str, str]:
    store = Store(str(db))
    key = store.create_key("bench")
    store.close()
    process = subprocess.Popen([sys.executable, "-m", "gwlab.cli", "serve", "--db", str(db),
                                "--batch-expire-after", "100"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip(), key


def gateway_rates(n: int, root: Path) -> dict[str, float]:
    process, url, key = start_gateway(root / f"g{n}.sqlite")
    try:
        with Gateway(url, key, deadline=600) as gw:
            pairs = items(n)
            started = time.perf_counter()
            job = gw.batches.submit(pairs, endpoint=ENDPOINT)
            submit = n / (time.perf_counter() - started)
            while not job.terminal:
                time.sleep(0.5)
                job = gw.batches.retrieve(job.id)
            started = time.perf_counter()
            collation = gw.batches.results(job, [c for c, _ in pairs])
            collect = n / (time.perf_counter() - started)
        assert len(collation.results) == n, collation.counts()
        return {"submit": submit, "collect": collect, "answered": collation.counts()["succeeded"]}
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="*", default=[10_000, 50_000])
    parser.add_argument("--client-only", action="store_true", help="build and parse alone: no gateway")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per figure; the median is printed")
    args = parser.parse_args()
    if args.client_only:
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
              f"median of {args.repeats} runs; goal >= 20,000 rows/s each")
        for n in args.rows:
            local = local_rates(n, args.repeats)
            print(f"{n:>7,} rows | build {local['build']:>9,.0f} rows/s (bare json.dumps {local['bare_build']:>9,.0f})"
                  f" | parse {local['parse']:>9,.0f} rows/s (bare json.loads {local['bare_parse']:>9,.0f})"
                  f" | peak {local['peak_mb_per_50k']:.0f} MB per 50k rows")
            print(f"{'':>7}        per CPU-second of one core: build {local['cpu_build']:>9,.0f} rows/s"
                  f" | parse {local['cpu_parse']:>9,.0f} rows/s")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            local = local_rates(n)
            remote = gateway_rates(n, Path(tmp))
            print(f"{n:>7,} rows | build {local['build']:>9,.0f} rows/s (bare json.dumps {local['bare_build']:>9,.0f})"
                  f" | parse {local['parse']:>9,.0f} rows/s (bare json.loads {local['bare_parse']:>9,.0f})"
                  f" | submit {remote['submit']:>8,.0f} rows/s | collect {remote['collect']:>8,.0f} rows/s"
                  f" | peak {local['peak_mb_per_50k']:.0f} MB per 50k rows")


if __name__ == "__main__":
    main()
