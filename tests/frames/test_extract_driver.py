"""One re-ask driver serves single calls and frame runs (issue 32 point 4): for the same answers they send
the same conversation, and a change to a family's form reaches both. Against tests/support/extract.py's stub."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor  # registers df.gw
from gwlab.wire.structured.forms import RESPONSE_FORMAT
from tests.support.extract import GOOD, KEY, REQUESTS, SCHEMA, stub_server


@pytest.fixture(scope="module")
def gw() -> Iterator[gwlab.Gateway]:
    with stub_server() as url, gwlab.Gateway(url, KEY) as gateway:
        yield gateway


def conversations(gw: gwlab.Gateway, prompt: str) -> tuple[list[Any], list[Any]]:
    """The request turns of one single call and of one frame row asking `prompt` (a chat, natively)."""
    REQUESTS.clear()
    reply = gw.chat(prompt, model="m", schema=SCHEMA)
    single = [r["body"]["messages"] for r in REQUESTS]
    REQUESTS.clear()
    out = pd.DataFrame({"text": [prompt]}).gw.extract("{text}", SCHEMA, model="m", gateway=gw, checkpoint=None,
                                                      progress=False)
    row = [r["body"]["messages"] for r in REQUESTS]
    assert reply.parsed == GOOD and out.loc[0, "order"] == 42
    return single, row


@pytest.mark.parametrize("prompt", ["good", "fix-missing please", "fix-badjson please"])
def test_a_single_call_and_a_frame_row_send_the_same_conversation(gw: gwlab.Gateway, prompt: str) -> None:
    single, row = conversations(gw, prompt)
    assert single == row and len(row) == (1 if prompt == "good" else 2)


def test_a_change_to_the_forms_reask_turns_reaches_both_paths(gw: gwlab.Gateway,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def reask_turns(error: Any) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": error.raw}, {"role": "user", "content": "FORM-SAYS: fix it"}]

    monkeypatch.setattr(RESPONSE_FORMAT, "reask_turns", reask_turns)
    single, row = conversations(gw, "fix-wrongtype please")
    assert single[1][-1]["content"] == row[1][-1]["content"] == "FORM-SAYS: fix it"
