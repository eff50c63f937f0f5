"""Which store a run's `checkpoint=` opens: a path is the SQLite `Checkpoint`, a `postgresql://` URL the
PostgreSQL store, "auto" the default file.

Apart from both stores, so each imports only the interface (checkpoint.py) and neither imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gwlab.frames.store.checkpoint import AnswerStore, Checkpoint, is_store_url

__all__ = ["ENV_CHECKPOINT", "default_checkpoint_path", "open_checkpoint", "open_for_run"]


def open_checkpoint(spec: str | Path) -> AnswerStore:
    """A path: the SQLite `Checkpoint`; a `postgresql://` URL: the PostgreSQL store (needs psycopg)."""
    if is_store_url(spec):
        from gwlab.frames.store.checkpoint_postgres import PostgresCheckpoint

        return PostgresCheckpoint(str(spec))
    return Checkpoint(spec)


ENV_CHECKPOINT = "GWLAB_CHECKPOINT"


def default_checkpoint_path() -> Path:
    """Where `checkpoint="auto"` keeps answers: `$GWLAB_CHECKPOINT`, else ~/.cache/gwlab/frames.sqlite."""
    return Path(os.environ.get(ENV_CHECKPOINT) or Path.home() / ".cache" / "gwlab" / "frames.sqlite")


def open_for_run(spec: Any) -> tuple[AnswerStore | None, bool]:
    """(store, opened here) for a run's `checkpoint=` option: None/False keep nothing; a store is used as
    given (its owner closes it); "auto" opens the default file; a path or URL opens that store."""
    if spec is None or spec is False:
        return None, False
    if isinstance(spec, AnswerStore):
        return spec, False
    if isinstance(spec, str) and spec == "auto":
        return open_checkpoint(default_checkpoint_path()), True
    return open_checkpoint(spec), True
