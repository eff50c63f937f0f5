"""What an operator can tune on the local gateway; everything has a safe default."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gwlab.wire.limits import MAX_BODY_BYTES_DEFAULT


def default_db_path() -> str:
    """`GWLAB_DB` or a file in the user's cache, so `gwlab keys` and `gwlab serve` meet by default."""
    return os.environ.get("GWLAB_DB") or str(Path.home() / ".cache" / "gwlab" / "gateway.sqlite")


@dataclass(frozen=True, slots=True)
class Settings:
    db_path: str = ""
    max_body_bytes: int = MAX_BODY_BYTES_DEFAULT
    rate_limit_rpm: int | None = None  # per key; None: off
    video_seconds_per_step: float = 0.2  # pace of the preview renderer's progress, for polling tests

    def resolved_db(self) -> str:
        return self.db_path or default_db_path()
