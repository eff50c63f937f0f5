"""df.gw's prompt families say per row how each answer ended, in the ledger's words (issues 13.7, 18.8).

The real embedded gateway, greedy, a 3-token cap on a prompt that asks for a long story: the cap ends
every answer, so every row is `capped` in the `ending` column and in the ledger row of its call,
and a rerun served from the checkpoint says the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gwlab.client.gateway import Gateway

LONG = "Q: Tell me a long story about a dragon who lived in a {place}.\nA: Once upon a time"
PROTOCOL_WORD = {"chat": ("finish", "length"), "respond": ("status", "incomplete"),
                 "messages": ("finish", "max_tokens")}


@pytest.fixture(scope="module")
def gw(gateway: Any) -> Iterator[Gateway]:
    client = Gateway(gateway.base_url, gateway.api_key)
    yield client
    client.close()


@pytest.mark.parametrize("method", list(PROTOCOL_WORD))
def test_capped_rows_say_capped_in_the_frame_and_the_ledger(gw: Gateway, method: str, tmp_path: Path) -> None:
    frame = pd.DataFrame({"place": ["castle", "cave"]})
    mark = len(gw.ledger)
    run = getattr(frame.gw, method)
    out = run(LONG, max_tokens=3, params={"temperature": 0}, gateway=gw, checkpoint=tmp_path / "c.sqlite",
              progress=False)
    column, word = PROTOCOL_WORD[method]
    assert out[column].tolist() == [word, word]
    assert out["ending"].tolist() == ["capped", "capped"]
    calls = gw.ledger.entries()[mark:]
    assert [(c.ending, c.complete) for c in calls] == [("capped", False)] * 2
    again = run(LONG, max_tokens=3, params={"temperature": 0}, gateway=gw, checkpoint=tmp_path / "c.sqlite",
                progress=False)
    assert again["__status"].tolist() == ["cached", "cached"] and again["ending"].tolist() == ["capped", "capped"]
