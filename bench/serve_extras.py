"""What logprobs and embeddings cost on the embedded gateway's engines (docs/gateway.md, "Logprobs" and
"Embeddings").

Run: .venv/bin/python bench/serve_extras.py [--tokens 32] [--repeats 3]

For each local text model it times one greedy answer of `--tokens` tokens without logprobs, with
logprobs only (top_logprobs 0) and with top_logprobs 20 (median of `--repeats`). Then it times E5
embeddings of 1 and of 32 short texts (milliseconds per text). Times are wall clock on whatever
machine runs it: compare the columns of one run, not runs on different machines.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from gwlab.local.engines import get_decider, get_generator
from gwlab.local.engines.base import GenerationRequest, GenerationUsage

MODELS = ("local/smollm2-135m-instruct", "local/gemma-3-270m")
PROMPT_TURN = [("user", "Describe the sea in a few sentences.")]
TEXTS = ["My refund has not arrived after two weeks.", "The new dark mode looks great on my phone."]


def _answer_seconds(generator: Any, tokens: int, top: int | None) -> float:
    prompt = generator.build_prompt("", PROMPT_TURN)
    request = GenerationRequest(prompt=prompt, max_tokens=tokens, temperature=0.0, top_logprobs=top)
    started = time.perf_counter()
    usage = GenerationUsage()
    for _ in generator.stream(request, usage):
        pass
    return (time.perf_counter() - started) / max(usage.completion_tokens, 1)


def logprobs(tokens: int, repeats: int) -> None:
    print("model | ms/token: none | logprobs | top_logprobs 20")
    for model in MODELS:
        generator = get_generator(model)
        _answer_seconds(generator, 4, None)  # load the weights outside the timing
        cells = [statistics.median(_answer_seconds(generator, tokens, top) for _ in range(repeats)) * 1000
                 for top in (None, 0, 20)]
        print(f"{model} | " + " | ".join(f"{c:.1f}" for c in cells))


def embeddings(repeats: int) -> None:
    decider = get_decider()
    decider.embed(TEXTS[:1])  # load the model outside the timing
    for n in (1, 32):
        texts = [TEXTS[i % 2] + f" ({i})" for i in range(n)]
        seconds = statistics.median(_timed(decider.embed, texts) for _ in range(repeats))
        print(f"embeddings of {n} text(s): {seconds * 1000 / n:.1f} ms per text")


def _timed(call: Any, *args: Any) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logprobs(args.tokens, args.repeats)
    embeddings(args.repeats)


if __name__ == "__main__":
    main()
