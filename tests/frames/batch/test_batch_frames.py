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


EXTRACT_SCHEMA = {"sentiment": ["positive", "negative"], "refund": bool}


def test_extract_as_a_batch_job_gives_the_typed_columns_of_a_synchronous_extract(gateway: RunningGateway,
                                                                                   tmp_path: Path) -> None:
    """The structured-output form travels inside the batch line, so the local grammar constrains the
    answer as in a synchronous call; the answers are read into the same typed columns, at the batch rate."""
    frame = pd.DataFrame({"text": ["I love my new kettle, it works perfectly.",
                                   "The kettle broke on day two; I want my money back."]})
    options = {"model": TEXT_MODEL, "max_tokens": 24, "progress": False, "max_reasks": 0}
    prompt = "Sentiment and whether a refund is asked: {text}"
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        sync = frame.gw.extract(prompt, EXTRACT_SCHEMA, gateway=gw, checkpoint=tmp_path / "s.sqlite", **options)
        batch = frame.gw.extract(prompt, EXTRACT_SCHEMA, gateway=gw, checkpoint=tmp_path / "b.sqlite",
                                 batch=FAST, prices=PRICES, **options)
        again = frame.gw.extract(prompt, EXTRACT_SCHEMA, gateway=gw, checkpoint=tmp_path / "b.sqlite",
                                 batch=FAST, prices=PRICES, **options)
    assert list(batch.columns) == list(sync.columns)
    assert dict(batch.dtypes) == dict(sync.dtypes)  # category and boolean, as the schema says
    assert batch["__error"].isna().all(), batch["__error"].tolist()
    assert batch["sentiment"].isin(["positive", "negative"]).all() and batch["refund"].isin([True, False]).all()
    assert batch.run.batch["collected"] == 2 and batch.run.batch["submitted"] == 2
    assert batch.run.cost == pytest.approx((batch.run.input_tokens * 2.0 + batch.run.output_tokens * 8.0) / 2e6)
    assert again.run.batch["submitted"] == again.run.batch["collected"] == 0  # collecting twice pays nothing
    assert again[["sentiment", "refund"]].equals(batch[["sentiment", "refund"]])
