"""What an operator can tune on the local gateway; everything has a safe default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gwlab.errors import InvalidRequest
from gwlab.local.limits import Limits
from gwlab.wire.jobs.batches import OPENAI_BATCHES
from gwlab.wire.limits import MAX_BODY_BYTES_DEFAULT

BATCH_FILE_MAX_BYTES_DEFAULT = OPENAI_BATCHES.max_bytes  # the provider's 200 MB
GGUF_ENV = "GWLAB_GGUF"  # "NAME=PATH;NAME2=PATH2": the user's GGUF models, for notebooks and Binder


def default_db_path() -> str:
    """`GWLAB_DB` or a file in the user's cache, so `gwlab keys` and `gwlab serve` meet by default."""
    return os.environ.get("GWLAB_DB") or str(Path.home() / ".cache" / "gwlab" / "gateway.sqlite")


@dataclass(frozen=True, slots=True)
class Settings:
    db_path: str = ""
    max_body_bytes: int = MAX_BODY_BYTES_DEFAULT
    rate_limit_rpm: int | None = None  # per key; None: off
    video_seconds_per_step: float = 0.2  # pace of the preview renderer's progress, for polling tests
    # the user's GGUF models as (id, path) pairs; None: whatever GWLAB_GGUF names (none when it is unset)
    gguf: tuple[tuple[str, str], ...] | None = None
    limits: Limits = field(default_factory=Limits)  # caps on work, realtime and connections (limits.py)
    # batches (files + batches, message batches): an upload's cap, the window a job has, its pace
    batch_file_max_bytes: int = BATCH_FILE_MAX_BYTES_DEFAULT
    batch_window_seconds: float | None = None  # None: the window the job asked for (24 h)
    batch_seconds_per_request: float = 0.0  # a pause before each line, so tests can act part-way
    batch_expire_after: int | None = None  # expire once this many lines ran (tests: expiry part-way)
    files_dir: str = ""  # uploaded and result files; "" : a `files` folder beside the database
    # Host names served besides the connection's own address and, on loopback, localhost; "*": any
    allowed_hosts: tuple[str, ...] = ()

    def resolved_db(self) -> str:
        return self.db_path or default_db_path()

    def resolved_files_dir(self) -> str:
        if self.files_dir:
            return self.files_dir
        db = self.resolved_db()
        if db == ":memory:":
            import tempfile

            return tempfile.mkdtemp(prefix="gwlab-files-")
        return str(Path(db).parent / (Path(db).stem + "-files"))

    def resolved_gguf(self) -> dict[str, str]:
        return dict(self.gguf) if self.gguf is not None else parse_gguf(os.environ.get(GGUF_ENV, ""), GGUF_ENV)


def parse_gguf(text: str, field: str) -> dict[str, str]:
    """`NAME=PATH` entries separated by ";" (a path may hold ":" on Windows and "," in a name is odd
    enough); a malformed entry is an error naming `field`, never skipped."""
    models: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        name, sep, path = (part.strip() for part in entry.partition("="))
        if not sep or not name or not path:
            raise InvalidRequest(field, f"{entry!r} is not NAME=PATH")
        models[name] = path
    return models
