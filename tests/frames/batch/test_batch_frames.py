"""`batch=` on the text runs against the real embedded gateway: the same columns as a synchronous run,
answers from the local model, ledger rows at the batch rate, and `gwlab.batches()`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gwlab
from gwlab import BatchOptions
from gwlab.client.gateway import Gateway
from gwlab.frames.run.usage import summarize
from tests.support.gateways import RunningGateway
from tests.support.models import TEXT_MODEL

FAST = BatchOptions(poll=0.1, max_poll=0.5)
PRICES = {TEXT_MODEL: {"input": 2.0, "output": 8.0}}


@pytest.mark.parametrize("method", ["chat", "respond", "messages"])
def test_a_batch_run_returns_the_columns_of_a_synchronous_run(gateway: RunningGateway, tmp_path: Path,
                                                              method: str) -> None:
    frame = pd.DataFrame({"q": ["Q: 2+2?\nA:", "Q: Capital of France?\nA:"]})
    cap = {"max_tokens": 16}
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        run = getattr(frame.gw, method)
        sync = run("{q}", model=TEXT_MODEL, gateway=gw, checkpoint=tmp_path / "s.sqlite", progress=False, **cap)
        batch = run("{q}", model=TEXT_MODEL, gateway=gw, checkpoint=tmp_path / "b.sqlite", progress=False,
                    batch=FAST, prices=PRICES, **cap)
        usage = gw.usage
    assert list(batch.columns) == list(sync.columns)
    assert (batch["__error"].isna()).all() and batch["text"].str.len().gt(0).all()
    assert batch.run.batch["api"] == ("anthropic" if method == "messages" else "openai")
    assert batch.run.batch["collected"] == 2 and batch.run.input_tokens > 0
    rows = usage[usage["family"] == "batch"]
    assert len(rows) == 2 and rows["input_tokens"].sum() == batch.run.input_tokens
    cost = summarize(rows, PRICES)["cost"].sum()
    assert cost == pytest.approx(batch.run.cost) and cost > 0  # the batch rate, from the ledger as from the run
    sync_cost = (batch.run.input_tokens * 2.0 + batch.run.output_tokens * 8.0) / 1e6
    assert batch.run.cost == pytest.approx(sync_cost / 2)
    listing = gwlab.batches(tmp_path / "b.sqlite")
    assert list(listing["status"]) == [("ended" if method == "messages" else "completed")]


def test_batch_is_refused_where_it_cannot_apply(gateway: RunningGateway, tmp_path: Path) -> None:
    frame = pd.DataFrame({"q": ["a"]})
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        with pytest.raises(gwlab.InvalidRequest, match="decisions rows cannot go as a provider batch job"):
            frame.gw.decide("{q}", {"x": {"type": "noul", "instructions": "Is it?"}}, gateway=gw, batch=True,
                            checkpoint=tmp_path / "c.sqlite")
        with pytest.raises(gwlab.InvalidRequest, match="repeats"):
            frame.gw.chat("{q}", model=TEXT_MODEL, max_tokens=2, gateway=gw, batch=True, repeats=2,
                          checkpoint=tmp_path / "c.sqlite")
        with pytest.raises(gwlab.InvalidRequest, match="checkpoint"):
            frame.gw.chat("{q}", model=TEXT_MODEL, max_tokens=2, gateway=gw, batch=True, checkpoint=None)
