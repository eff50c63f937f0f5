"""Peak memory of one process with the embedded gateway's models loaded, added one at a time (Binder: 1-2 GB).

Run: MALLOC_ARENA_MAX=2 .venv/bin/python bench/local_rss.py   (binder/start sets MALLOC_ARENA_MAX=2)

An in-process gateway (as a notebook kernel has) answers, in turn: a decision, a chat on Gemma 3 270M,
a chat on SmolLM2-135M-Instruct, then Whisper tiny.en transcribes a second of silence and espeak-ng speaks
(what the realtime notebook adds). After each step it prints the process's peak RSS (ru_maxrss).
"""

from __future__ import annotations

import os
import resource

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    import httpx

    import gwlab.local

    print(f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '(unset)')}")
    print(f"{'after':<48} {'peak RSS MB':>12}")
    print(f"{'python + gwlab.local':<48} {peak_mb():>12.0f}")
    gw = gwlab.local.start()
    print(f"{'the gateway started (no model yet)':<48} {peak_mb():>12.0f}")
    headers = {"Authorization": f"Bearer {gw.api_key}"}
    with httpx.Client(base_url=gw.base_url, headers=headers, timeout=300) as http:
        refund = {"type": "noul", "instructions": "Is the customer asking for money back?"}
        http.post("/decisions", json={"model": "local/decide-e5-small", "state": "My card was charged twice.",
                                      "questions": {"refund": refund}}).raise_for_status()
        print(f"{'a decision (multilingual-e5-small)':<48} {peak_mb():>12.0f}")
        for model in ("local/gemma-3-270m", "local/smollm2-135m-instruct"):
            http.post("/chat/completions", json={"model": model, "max_tokens": 32, "temperature": 0,
                                                 "messages": [{"role": "user", "content": "Name three colours."}]},
                      ).raise_for_status()
            print(f"{'a chat on ' + model:<48} {peak_mb():>12.0f}")
    try:
        from gwlab.local.engines import get_speaker, get_transcriber

        get_transcriber().transcribe(b"\0\0" * 16000, 16000)
        get_speaker().speak("Hello there.", "alloy")
        print(f"{'Whisper tiny.en and espeak-ng (realtime)':<48} {peak_mb():>12.0f}")
    except ImportError as exc:
        print(f"realtime engines not installed ({exc.name}): gwlab[speech]")
    gw.stop()


if __name__ == "__main__":
    main()
