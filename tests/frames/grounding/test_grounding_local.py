"""Grounding on the real embedded gateway and its local text model: whatever the model answers, each
grounded (or misplaced) value's span is in its text and holds the value, and each value not found is not
written there.
Greedy, so a run answers as the last did (a sampled answer once gave "BW10421", which the aligner took for the
"10421" of "BRW-10421" until an id's digits stopped counting as a number: tests/wire/test_grounding.py)."""

from __future__ import annotations

import re
import unicodedata

import pandas as pd

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)

TEXTS = ["Order BRW-10421 arrived broken on 15 Jan 2026. It cost $29.90.",
         "Where is my parcel? It has been ten days and nobody answers."]


def _plain(text: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def _written(value: str, text: str) -> bool:
    """Whether the text writes the value's words whole, in order, whatever the case and punctuation between."""
    words = re.findall(r"[^\W_]+", value)
    pattern = r"(?<![^\W_])" + r"[\W_]*".join(map(re.escape, words)) + r"(?![^\W_])"
    return bool(words) and re.search(pattern, text, re.IGNORECASE) is not None


def test_grounding_of_the_local_models_answers_points_at_what_the_text_writes(gw):
    frame = pd.DataFrame({"text": TEXTS})
    out = frame.gw.extract("Customer message: {text}\n\nThe order id and the customer's first name.",
                           {"order": str | None, "name": str | None}, max_tokens=40, gateway=gw,
                           params={"temperature": 0}, checkpoint=None, progress=False, max_reasks=0,
                           errors="coerce")
    checked = 0
    for text, (_, row) in zip(TEXTS, out.iterrows(), strict=True):
        for field in ("order", "name"):
            status, span, value = row[f"{field}__grounding"], row[f"{field}__span"], row[field]
            if pd.isna(value):
                assert pd.isna(status) and span is None
                continue
            checked += 1
            if status in ("exact", "misplaced"):  # misplaced: written, as another kind of text than the field's
                start, end = span
                assert 0 <= start < end <= len(text) and _plain(text[start:end]) == _plain(value)
                assert status == "exact" or field in row["__notes"]
            else:
                assert status in ("fuzzy", "not_found")
                if status == "not_found":
                    assert span is None and not _written(value, text)
                    assert field in row["__notes"]
    assert out["__status"].isin(["sent", "error"]).all()
    assert checked or (out["__status"] == "error").all() or out[["order", "name"]].isna().all().all()
