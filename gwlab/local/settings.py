"""What an operator can tune on the local gateway; everything has a safe default."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gwlab.errors import InvalidRequest
from gwlab.wire.limits import MAX_BODY_BYTES_DEFAULT

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
    # Host names served besides the connection's own address and, on loopback, localhost; "*": any
    allowed_hosts: tuple[str, ...] = ()

    def resolved_db(self) -> str:
        return self.db_path or default_db_path()

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
