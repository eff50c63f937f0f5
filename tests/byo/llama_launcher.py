"""Start llama-cpp-python's OpenAI-compatible server with llama.cpp's extra buffer types off.

The server has no flag for it, and on this VM's CPU (AMX advertised, not granted) a native build puts weights in
AMX buffers and crashes in its first matmul. So, as gwlab/local/engines/gemma.py does, patch the default model
params the server's `Llama()` starts from, then hand over to the server's own `main()` (its arguments as given).
"""

from __future__ import annotations

from typing import Any

import llama_cpp.llama as llama_module


def _patch_default_params() -> None:
    default_params = llama_module.llama_cpp.llama_model_default_params

    def params_without_extra_bufts() -> Any:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_module.llama_cpp.llama_model_default_params = params_without_extra_bufts


if __name__ == "__main__":
    _patch_default_params()
    from llama_cpp.server.__main__ import main

    main()
