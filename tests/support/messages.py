"""The 312 labelled support messages of the notebooks and their questions, for tests that need real text
with labels (cascades, a text oracle)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parents[2] / "notebooks" / "data"
QUESTIONS: dict = json.loads((DATA / "questions.json").read_text())


def support_messages(rows: int | None = None) -> pd.DataFrame:
    """The first `rows` messages (all when None), indexed by id, with their label columns."""
    frame = pd.read_csv(DATA / "support_messages.csv", index_col="id")
    return frame if rows is None else frame.head(rows)
