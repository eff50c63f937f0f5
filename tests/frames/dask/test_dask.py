"""The dask recipe on a LocalCluster: meta from the questions, one checkpoint and one rate limit for all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames import dask as gw_dask
from gwlab.frames.cascade.summary import CascadeSummary
from tests.support.gateways import RequestLog
from tests.support.messages import QUESTIONS as ASKED
from tests.support.messages import support_messages
from tests.support.models import DECIDE_MODEL, TEXT_MODEL
from tests.support.tickets import DECISIONS, QUESTIONS

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture
def process_client() -> Iterator[object]:
    """Two worker processes: the limit must hold across processes, not only threads."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def gw(gateway) -> Iterator[Gateway]:
    with Gateway(gateway.base_url, gateway.api_key) as client:
        yield client


def tickets(n: int) -> pd.DataFrame:
    texts = [f"Order {i % 9} was charged twice and the refund is late" for i in range(n)]
    return pd.DataFrame({"ticket": texts, "n": range(n)})


def test_meta_comes_from_the_questions_and_nothing_is_sent_to_build_it(gw: Gateway, gateway,
                                                                       tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    ddf = dd.from_pandas(tickets(12), npartitions=3)
    lazy = gw_dask.decide(ddf, "{ticket}", QUESTIONS, gateway=gw, checkpoint=tmp_path / "c.sqlite")
    expected = gw_dask.decide_meta(ddf._meta, QUESTIONS)
    assert list(lazy.columns) == list(expected.columns)
    assert dict(lazy.dtypes) == dict(expected.dtypes)
    assert log.settled(mark, DECISIONS) == []  # lazy: no request until compute()


def test_partitions_share_one_checkpoint_so_a_second_compute_bills_nothing(
        client: object, gw: Gateway, gateway, tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    ddf = dd.from_pandas(tickets(36), npartitions=4)
    lazy = gw_dask.decide(ddf, "{ticket}", QUESTIONS, gateway=gw, checkpoint=tmp_path / "c.sqlite")
    mark = log.mark()
    out = lazy.compute()
    assert len(out) == 36 and out["urgent__noul"].notna().all()
    assert out.index.equals(tickets(36).index)
    # 9 distinct tickets; partitions see the same texts, and the shared checkpoint keeps them from paying
    # twice unless two partitions asked at the same moment (then the answer is simply stored again)
    first = len(log.settled(mark, DECISIONS))
    assert 9 <= first <= 9 * 4
    mark = log.mark()
    again = lazy.compute()
    assert log.settled(mark, DECISIONS) == []
    assert set(again["__status"]) == {"cached"}
    # the same answers (two partitions asking at once each got one; the checkpoint keeps the last)
    pd.testing.assert_frame_equal(again.drop(columns=["__status", "__request_id"]),
                                  out.drop(columns=["__status", "__request_id"]))


def test_the_rate_limit_holds_across_worker_processes(process_client: object, gw: Gateway, gateway,
                                                      tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    frame = pd.DataFrame({"ticket": [f"Invoice {i} is wrong" for i in range(16)]})
    ddf = dd.from_pandas(frame, npartitions=4)
    lazy = gw_dask.decide(ddf, "{ticket}", QUESTIONS, gateway=gw, checkpoint=tmp_path / "c.sqlite",
                          requests_per_minute=600, burst=0.5, concurrency=4)  # 10/s shared, holds 5
    mark = log.mark()
    lazy.compute()
    rows = log.settled(mark, DECISIONS)
    assert len(rows) == 16
    starts = sorted(r["ts"] - r["latency_ms"] / 1000 for r in rows)
    # 4 partitions x 4 in flight could start all 16 at once; the shared bucket lets its 5 go, then
    # one per 0.1 s: the last start comes at least ~1.1 s after the first, whatever the machine's speed
    assert starts[-1] - starts[0] >= 0.9


def test_a_gateway_spec_carries_the_key_to_workers_through_the_method_named_for_it_and_never_shows_it():
    key = "sk-dask-spec-canary-0123456789"
    with Gateway("http://gateway.test/v1", key) as gw:
        assert gw.twin.transport.api_key_for_workers() == key
        spec = gw_dask.GatewaySpec.of(gw)
        assert (spec.base_url, spec.api_key) == ("http://gateway.test/v1", key)
        assert key not in repr(spec) + repr(gw) + repr(gw.twin.transport)


def test_a_blank_value_fails_its_row_on_the_workers_too_unless_blank_send(
        client: object, gw: Gateway, tmp_path: Path) -> None:
    frame = pd.DataFrame({"subject": ["Refund", "Hello"] * 3, "body": ["charged twice", "  "] * 3})
    ddf = dd.from_pandas(frame, npartitions=2)
    failed = gw_dask.decide(ddf, "{subject}: {body}", QUESTIONS, gateway=gw,
                            checkpoint=tmp_path / "c.sqlite").compute()
    assert list(failed["__status"].iloc[1::2]) == ["error"] * 3
    assert failed["__error"].iloc[1::2].str.contains("empty value in column 'body'").all()
    sent = gw_dask.decide(ddf, "{subject}: {body}", QUESTIONS, gateway=gw, checkpoint=tmp_path / "c.sqlite",
                          blank="send").compute()
    assert sent["__error"].isna().all() and sent["urgent__noul"].notna().all()


# --- a cascade on Dask: the same answers as on pandas, a recompute pays nothing -------------------------

BOTH = {"refund": ASKED["refund"], "urgent": ASKED["urgent"]}  # the oracle asks refund alone


@pytest.fixture(scope="module")
def support() -> pd.DataFrame:
    return support_messages(60)


def test_dask_cascade_with_labels_answers_as_the_pandas_cascade_on_the_same_frame_and_seed(
        client: object, support: pd.DataFrame, gw: Gateway, tmp_path: Path) -> None:
    cascade = gwlab.Cascade(oracle=support["refund"], question="refund", metric="accuracy", target=0.6, delta=0.2,
                            sample=30)
    ddf = dd.from_pandas(support, npartitions=3)
    lazy = gw_dask.decide(ddf, "{text}", BOTH, cascade=cascade, gateway=gw, checkpoint=tmp_path / "c.sqlite")
    pandas_run = support.gw.decide("{text}", BOTH, cascade=cascade, gateway=gw, checkpoint=None, progress=False)
    out = lazy.compute()
    assert list(out.columns) == list(pandas_run.columns)  # the delivered {q}__noul, the proxy's {q}__proxy__noul
    for column in ("refund__answer", "refund__source", "refund__noul"):
        pd.testing.assert_series_equal(out[column], pandas_run[column], check_dtype=False)
    np.testing.assert_allclose(out["refund__proxy_score"], pandas_run["refund__proxy_score"], rtol=1e-6)
    known, expected = lazy.cascade, pandas_run.run.cascade
    assert isinstance(known, CascadeSummary) and isinstance(expected, CascadeSummary)  # typed, as on pandas
    assert not hasattr(lazy[["refund__answer"]], "cascade")  # a derived frame describes other rows: not carried
    assert known["oracle_calls"] == expected["oracle_calls"] and known["proxy_rows"] == expected["proxy_rows"] > 0
    assert known["threshold"] == pytest.approx(expected["threshold"], rel=1e-6)
    assert known["oracle_sent"] is None and known["sample_oracle"]["sent"] == 0  # labels cost no request


def test_dask_cascade_with_a_model_oracle_pays_nothing_twice_on_recompute_or_a_second_call(
        client: object, support: pd.DataFrame, gw: Gateway, gateway, tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    cascade = gwlab.Cascade(oracle=DECIDE_MODEL, question="refund", target=0.6, delta=0.2, sample=20)
    ddf = dd.from_pandas(support, npartitions=3)
    options = {"gateway": gw, "checkpoint": tmp_path / "c.sqlite"}
    mark = log.mark()
    lazy = gw_dask.decide(ddf, "{text}", BOTH, cascade=cascade, **options)
    eager = len(log.settled(mark, DECISIONS))
    assert eager == len(support) + lazy.cascade["sample_oracle"]["sent"] > len(support)  # proxy and sample
    out = lazy.compute()
    calls = lazy.cascade["oracle_calls"]
    assert len(log.settled(mark, DECISIONS)) == eager + calls["routed"]  # the proxy again: from the checkpoint
    by_oracle = out["refund__source"] == "oracle"
    assert by_oracle.sum() == calls["total"] and out.loc[by_oracle, "refund__answer"].notna().all()
    mark = log.mark()
    again = gw_dask.decide(ddf, "{text}", BOTH, cascade=cascade, **options)
    assert again.cascade["sample_oracle"]["cached"] == calls["sampled"]
    pd.testing.assert_frame_equal(again.compute().drop(columns=["__status", "__request_id"]),
                                  out.drop(columns=["__status", "__request_id"]))
    lazy.compute()
    assert log.settled(mark, DECISIONS) == []


def test_dask_cascade_with_a_chat_model_oracle_answers_its_rows_with_the_question_options(
        client: object, support: pd.DataFrame, gw: Gateway, gateway, tmp_path: Path) -> None:
    log = RequestLog(gateway.db)
    team = {"team": ASKED["team"]}
    cascade = gwlab.Cascade(oracle=TEXT_MODEL, protocol="chat", target=0.6, delta=0.2, sample=4, max_tokens=48)
    mark = log.mark()
    out = gw_dask.decide(dd.from_pandas(support.head(10), npartitions=2), "{text}", team, cascade=cascade,
                         gateway=gw, checkpoint=tmp_path / "c.sqlite").compute()
    by_oracle = out.loc[out["team__source"] == "oracle", "team__answer"]
    assert len(by_oracle) > 0 and set(by_oracle.dropna()) <= set(ASKED["team"]["criteria"])
    assert by_oracle.notna().any() and len(log.settled(mark, "/v1/chat/completions")) >= len(by_oracle)


def test_dask_cascade_refuses_checkpoint_none_naming_it_before_sending(
        support: pd.DataFrame, gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    cascade = gwlab.Cascade(oracle=support["refund"], question="refund")
    with pytest.raises(InvalidRequest) as caught:
        gw_dask.decide(dd.from_pandas(support, npartitions=2), "{text}", BOTH, cascade=cascade, gateway=gw,
                       checkpoint=None)
    assert caught.value.field == "checkpoint" and log.rows(mark) == []
