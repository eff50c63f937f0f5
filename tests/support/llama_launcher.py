"""Start llama-cpp-python's OpenAI-compatible server with llama.cpp's extra buffer types off.

The server has no flag for it, and on this VM's CPU (AMX advertised, not granted) a native build puts weights in
AMX buffers and crashes in its first matmul. So the default model params the server's `Llama()` starts from are
patched as gwlab's own engine patches them (`without_extra_bufts`), then the server's own `main()` runs with
its arguments as given.
"""

from __future__ import annotations

from gwlab.local.engines.llama import without_extra_bufts

if __name__ == "__main__":
    without_extra_bufts()
    from llama_cpp.server.__main__ import main

    main()
