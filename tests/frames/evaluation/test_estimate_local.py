"""`gwlab.estimate` and the sequential comparison on the real embedded gateway's answers to the support
messages: the tidy columns decide writes are read as they are, and a sequential run
(`gwlab.compare(..., sequential=gwlab.Sequential(...))`, which runs `compare_sequential`) sends only the
rows it used."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from tests.support.gateways import RequestLog
from tests.support.messages import QUESTIONS, support_messages

REFUND = {"refund": QUESTIONS["refund"]}


@pytest.fixture(scope="module")
def answered(gw: Gateway) -> pd.DataFrame:
    frame = support_messages(60)
    out = frame.gw.decide("{text}", REFUND, gateway=gw, progress=False, checkpoint=None)
    labels = frame["refund"].astype(object)
    labels.iloc[20:] = None  # 20 labels, as if a person gave them
    return out.assign(label=labels, kind=frame["kind"])


def test_estimate_reads_decide_output_and_its_labelled_only_share_is_the_labels(answered: pd.DataFrame) -> None:
    table = gwlab.estimate(answered, truth="label", prob="refund", by="kind")
    assert set(table["kind"]) == set(answered["kind"]) and (table["answer"] == "true").all()
    assert table["rows"].sum() + table["missing"].sum() == len(answered)
    for _, row in table.iterrows():
        part = answered[(answered.kind == row["kind"]) & answered.label.notna()]
        if len(part):
            assert row["labelled_only"] == pytest.approx(part.label.astype(bool).mean())
        assert row["model_only"] == pytest.approx(answered.loc[answered.kind == row["kind"], "refund__noul"].mean())


def test_sequential_comparison_sends_only_the_rows_it_used(gw: Gateway, gateway) -> None:
    frame = support_messages(60)
    log = RequestLog(gateway.db)
    mark = log.mark()

    def side(template: str):
        def answer(rows: pd.DataFrame) -> pd.Series:
            out = rows.gw.decide(template, REFUND, gateway=gw, progress=False, checkpoint=None)
            return out["refund__noul"].map(lambda p: None if pd.isna(p) else bool(p >= 0.5))
        return answer

    result = gwlab.compare(side("{text}"), side("Customer message: {text}"), "refund",
                           sequential=gwlab.Sequential(frame, round_rows=20, budget=40))
    assert isinstance(result, gwlab.SequentialComparison)
    assert result.rows in (20, 40) and len(result.trace) == result.rows // 20
    assert -1 <= result.low <= result.high <= 1 and np.isfinite(result.low)
    assert len(log.settled(mark, "/v1/decisions")) == 2 * result.rows
