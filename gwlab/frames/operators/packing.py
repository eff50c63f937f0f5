"""Map-reduce packing: a text's estimated tokens and consecutive items in chunks that fit a room."""

from __future__ import annotations

import math

from gwlab.frames.run.budget import BYTES_PER_TOKEN

__all__ = ["PACK_SHARE", "pack", "tokens"]

# a chunk of an aggregate is packed to this share of the input limit: BYTES_PER_TOKEN guesses a row's
# tokens within about a quarter either way (frames/run/budget.py), so a full chunk may really be 4/3 larger
PACK_SHARE = 0.75


def tokens(text: str) -> int:
    """A text's estimated tokens, as the input-limit check guesses them."""
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)


def pack(items: list[str], room: int) -> list[list[str]]:
    """Consecutive items in chunks whose estimated tokens stay within `room`; an item over it alone is
    the caller's to refuse before this."""
    chunks: list[list[str]] = [[]]
    used = 0
    for item in items:
        size = tokens(f"- {item}\n")
        if chunks[-1] and used + size > room:
            chunks.append([])
            used = 0
        chunks[-1].append(item)
        used += size
    return chunks
