"""A checkpoint keys the embedded gateway's answers by its identity, not by its URL.

The embedded gateway gets a new port per kernel, so a re-run headless notebook asked every row again. It
now sends a stable identity ("local:" + a digest of its models, engine versions and code) with every
answer, and a run with a checkpoint keys by that: a new gateway on a new port serves the saved answers.
A hosted gateway (not on loopback) is never asked and keeps its URL key, as before; two local model sets
have two identities.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gwlab import Gateway
from tests.support.gateways import RequestLog, start_gateway, stop_gateway
from tests.support.tickets import DECISIONS, QUESTIONS

TICKETS = pd.DataFrame({"ticket": ["I was charged twice", "The app crashes on start", "Please add dark mode"]})


def decide(base_url: str, api_key: str, checkpoint: Path) -> pd.DataFrame:
    with Gateway(base_url, api_key) as gw:
        return TICKETS.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=checkpoint, progress=False)


def test_a_new_embedded_gateway_on_a_new_port_serves_the_checkpointed_answers(tmp_path: Path) -> None:
    checkpoint = tmp_path / "answers.sqlite"
    first = start_gateway(tmp_path / "first.sqlite")
    try:
        before = decide(first.base_url, first.api_key, checkpoint)
    finally:
        stop_gateway(first)
    assert before.run.sent == 3
    second = start_gateway(tmp_path / "second.sqlite")
    try:
        assert second.base_url != first.base_url
        mark = RequestLog(second.db).mark()
        after = decide(second.base_url, second.api_key, checkpoint)
        assert RequestLog(second.db).settled(mark, DECISIONS) == []  # zero requests sent
    finally:
        stop_gateway(second)
    assert (after.run.sent, after.run.cached) == (0, 3)
    answers = [c for c in before.columns if c.startswith(tuple(QUESTIONS))]
    pd.testing.assert_frame_equal(after[answers], before[answers])
    assert after.run.gateway == before.run.gateway and after.run.gateway.startswith("local:")


def test_another_local_model_set_is_another_identity(monkeypatch) -> None:
    from gwlab.local import catalog

    served = catalog.gateway_identity()
    extra = catalog.ModelInfo("me/tiny", "tiny (GGUF: tiny.gguf)", "a user's GGUF", catalog.TEXT_FAMILIES)
    monkeypatch.setitem(catalog._user, extra.id, extra)
    monkeypatch.setitem(catalog._user_files, extra.id, ("tiny.gguf", 1234))
    assert catalog.gateway_identity() != served and catalog.gateway_identity().startswith("local:")
    monkeypatch.setitem(catalog._user_files, extra.id, ("tiny.gguf", 4321))  # another file under the same id
    monkeypatch.setattr(catalog, "_identity", {})
    assert catalog.gateway_identity() != served
