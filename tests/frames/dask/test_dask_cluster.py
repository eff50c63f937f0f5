"""Beyond one machine: worker processes sharing no disk, a PostgreSQL checkpoint, limits held by the scheduler.

The cluster is a scheduler and `dask worker` processes, each in its own temporary directory with no path in
common (bench/harness/cluster.py); the gateway a loopback server with a fixed latency that logs when each
request arrived and whether its answer was delivered (bench/harness/latency_gateway.py). Every claim is read
from that log.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.cluster import ProcessCluster
from bench.harness.latency_gateway import LatencyGateway, max_in_window, max_overlap, serving
from gwlab.errors import InvalidRequest
from gwlab.frames import dask as gw_dask
from gwlab.frames.dask import GatewaySpec
from tests.support import wait_until
from tests.support.postgres import PostgresServer, postgres_server
from tests.support.tickets import tickets as ticket_frame

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
psycopg = pytest.importorskip("psycopg")

KEY = "sk-cluster-" + secrets.token_hex(16)  # in the workers' environment only
QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "criteria": {"billing": "payments", "tech": "bugs"}}}
LATENCY = 0.05


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    yield from postgres_server()


@pytest.fixture(scope="module")
def cluster() -> Iterator[ProcessCluster]:
    with ProcessCluster(env={"GWLAB_API_KEY": KEY}) as running:
        yield running


@pytest.fixture
def workers(cluster: ProcessCluster) -> ProcessCluster:
    """Two live workers (a test before may have killed one)."""
    cluster.ensure_workers(2)
    return cluster


@pytest.fixture
def gateway() -> Iterator[LatencyGateway]:
    with serving(LatencyGateway(LATENCY, KEY)) as running:
        yield running


def tickets(n: int, npartitions: int) -> object:
    return dd.from_pandas(ticket_frame(n), npartitions=npartitions)


def stored(url: str) -> int:
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('gwlab_answers')").fetchone()[0] is None:
            return 0
        return conn.execute("SELECT COUNT(*) FROM gwlab_answers").fetchone()[0]


FAMILIES = {
    "decide": (lambda ddf, **kw: gw_dask.decide(ddf, "{ticket}", QUESTIONS, **kw), "urgent__noul"),
    "chat": (lambda ddf, **kw: gw_dask.chat(ddf, "{ticket}", max_tokens=8, **kw), "text"),
    "respond": (lambda ddf, **kw: gw_dask.respond(ddf, "{ticket}", max_tokens=8, **kw), "text"),
    "messages": (lambda ddf, **kw: gw_dask.messages(ddf, "{ticket}", max_tokens=8, **kw), "text"),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_runs_on_workers_with_its_meta_given_so_nothing_is_sent_to_build_it(
        family: str, workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    build, column = FAMILIES[family]
    ddf = tickets(8, 2)
    lazy = build(ddf, gateway=GatewaySpec(gateway.base_url), checkpoint=postgres.new_database())
    assert gateway.snapshot() == []  # lazy: meta came from the family, no partition was run to infer it
    out = workers.client.compute(lazy).result(timeout=120)
    assert list(out.columns) == list(lazy.columns)
    assert dict(out.dtypes.astype(str)) == dict(lazy.dtypes.astype(str))
    assert (out["__status"] == "sent").all() and out[column].notna().all()
    if column == "text":  # each row got the answer to its own prompt
        assert (out["text"] == "re: " + out["ticket"]).all()
    assert len(gateway.answered_per_body()) == 8


def test_the_request_rate_summed_over_all_workers_stays_within_the_limit_in_every_window(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    rate = 5.0  # per second: 300 a minute for the whole cluster
    lazy = gw_dask.decide(tickets(30, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=postgres.new_database(), requests_per_minute=rate * 60, burst=0.2,
                          concurrency=4, limiter_name=f"rate-{secrets.token_hex(4)}")  # the bucket holds 1
    with distributed.get_task_stream(workers.client) as stream:
        out = workers.client.compute(lazy).result(timeout=120)
    assert (out["__status"] == "sent").all()
    assert len({task["worker"] for task in stream.data if "run_partition" in str(task["key"])}) == 2
    times = gateway.arrival_times()
    assert len(times) == 30
    # 4 partitions x 4 in flight could start 16 at once; the scheduler's bucket (1 request, 5 a second)
    # lets at most 1 + 5 * W arrive in any window of W seconds, summed over both workers
    for window in (1.0, 2.0, 4.0):
        assert max_in_window(times, window) <= 1 + rate * window, window


def test_the_token_rate_summed_over_all_workers_stays_within_the_limit_in_every_window(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    per_second = 350.0  # tokens: the bucket holds 1 s of them, more than one request's estimate (~250)
    lazy = gw_dask.decide(tickets(20, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=postgres.new_database(), tokens_per_minute=per_second * 60, burst=1.0,
                          concurrency=4, limiter_name=f"tokens-{secrets.token_hex(4)}")
    out = workers.client.compute(lazy).result(timeout=120)
    assert (out["__status"] == "sent").all()
    answered = [a for a in gateway.snapshot() if a.answered]
    times, tokens = [a.at for a in answered], [a.tokens for a in answered]
    assert len(answered) == 20 and sum(tokens) == out["__input_tokens"].sum()
    # each request is charged its estimate when let go and refunded to the billed count on its answer, so
    # the billed tokens arriving in any W seconds stay within what the bucket holds plus W seconds' rate;
    # a bucket per worker would let two workers send about twice that
    for window in (2.0, 4.0):
        assert max_in_window(times, window, tokens) <= per_second * (1 + window), window


def test_requests_in_flight_are_capped_across_the_cluster(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    lazy = gw_dask.decide(tickets(24, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=postgres.new_database(), concurrency=4, max_in_flight=2,
                          limiter_name=f"slots-{secrets.token_hex(4)}")
    out = workers.client.compute(lazy).result(timeout=120)
    assert (out["__status"] == "sent").all()
    assert max_overlap(gateway.snapshot()) <= 2  # 2 workers x 4 in flight each would reach 8


def test_a_429_with_retry_after_pauses_every_worker_of_the_cluster(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    gateway.rate_limit_at, gateway.retry_after = {4}, 2.0
    lazy = gw_dask.decide(tickets(12, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=postgres.new_database(), requests_per_minute=120, burst=0.5,
                          concurrency=2, limiter_name=f"pause-{secrets.token_hex(4)}")  # 2 a second
    out = workers.client.compute(lazy).result(timeout=120)
    assert (out["__status"] == "sent").all()
    (refused,) = gateway.arrival_times(429)
    during = [t for t in gateway.arrival_times() if refused < t < refused + gateway.retry_after]
    # at 2 requests a second, both workers together would send ~4 more in the 2 s pause; at most the one
    # request let go before the pause reached the scheduler may arrive
    assert len(during) <= 1, during
    assert len(gateway.answered_per_body()) == 12


def test_a_worker_killed_mid_run_then_the_run_again_answers_every_row_and_no_body_twice(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    gateway.hold_from = 6  # answer 6 requests, then hold the rest until released
    lazy = gw_dask.decide(tickets(24, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=url, concurrency=2)
    first = workers.client.compute(lazy)

    def held() -> int:
        return sum(1 for a in gateway.snapshot() if not a.answered and not a.cut)

    wait_until(lambda: held() == 4, what="both workers have 2 requests in flight, unanswered")
    wait_until(lambda: stored(url) == 6, what="every delivered answer is committed")
    victim = workers.worker_running_tasks()
    workers.kill(victim)
    wait_until(lambda: sum(a.cut for a in gateway.snapshot()) == 2, what="the killed worker's requests are cut")
    gateway.release()
    with contextlib.suppress(distributed.KilledWorker):
        first.result(timeout=120)  # the scheduler may finish the run on the surviving worker
    first.release()  # else the cluster would hand its result back instead of running again
    wait_until(workers.idle, what="the scheduler forgot the first run")
    out = lazy.compute()  # the run again, as a user would after a lost worker
    assert len(out) == 24 and out["urgent__noul"].notna().all() and out["team__choice"].notna().all()
    assert "cached" in set(out["__status"]) and set(out["__status"]) <= {"sent", "cached"}
    answered = gateway.answered_per_body()
    assert len(answered) == 24 and set(answered.values()) == {1}  # every body answered exactly once
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT COUNT(*), MAX(writes) FROM gwlab_answers").fetchone() == (24, 1)

    arrivals = len(gateway.snapshot())
    wait_until(workers.idle, what="the scheduler forgot the run again")
    again = lazy.compute()
    assert len(gateway.snapshot()) == arrivals  # a second compute() sends nothing
    assert set(again["__status"]) == {"cached"}
    assert workers.files("*.sqlite*") == []  # and nothing was kept in any process's files


def test_a_sqlite_checkpoint_the_workers_cannot_see_is_refused_naming_the_field(
        workers: ProcessCluster, gateway: LatencyGateway, tmp_path: Path) -> None:
    path = tmp_path / "driver-only" / "answers.sqlite"
    lazy = gw_dask.decide(tickets(4, 2), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=path)
    for made in path.parent.iterdir():  # as if the client's disk were another host's
        made.unlink()
    with pytest.raises(InvalidRequest) as refused:
        workers.client.compute(lazy).result(timeout=120)
    assert refused.value.field == "checkpoint" and "postgresql://" in str(refused.value)
    assert gateway.snapshot() == []
    assert not path.exists()  # no private file was started in its place


def test_the_key_is_in_no_task_graph_and_the_store_password_in_no_repr(gateway: LatencyGateway) -> None:
    url = "postgresql://gwlab:Sw0rdfish@db.example:5432/answers"
    from_env = gw_dask.decide(tickets(4, 2), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                              checkpoint=url)
    graph = dict(from_env.__dask_graph__())
    assert KEY.encode() not in pickle.dumps(graph)  # workers read GWLAB_API_KEY themselves
    assert "Sw0rdfish" not in repr(graph) and "Sw0rdfish" not in repr(from_env)
    spec = gw_dask.StoreSpec.of(url)  # how the graph carries the store: the workers need the password
    assert "Sw0rdfish" not in repr(spec) and "gwlab:***@db.example" in repr(spec)
    given = gw_dask.decide(tickets(4, 2), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url, KEY),
                           checkpoint=url)
    assert KEY not in repr(dict(given.__dask_graph__())) and KEY not in repr(given)


def test_no_file_is_needed_or_made_by_a_multi_host_run(
        workers: ProcessCluster, gateway: LatencyGateway, postgres: PostgresServer) -> None:
    lazy = gw_dask.decide(tickets(8, 2), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url),
                          checkpoint=postgres.new_database(), requests_per_minute=6000)
    workers.client.compute(lazy).result(timeout=120)
    assert workers.files("*.sqlite*") == [] and not os.environ.get("GWLAB_CHECKPOINT", "").startswith("/")


def test_without_distributed_a_missing_sqlite_file_is_refused_not_created(gateway: LatencyGateway,
                                                                          tmp_path: Path) -> None:
    path = tmp_path / "gone" / "answers.sqlite"
    lazy = gw_dask.decide(tickets(4, 2), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url, KEY),
                          checkpoint=path, requests_per_minute=600)
    for made in path.parent.iterdir():
        made.unlink()
    with pytest.raises(InvalidRequest, match="checkpoint"):
        lazy.compute(scheduler="sync")  # the SQLite limiter must not create the file behind the check
    assert not path.exists() and gateway.snapshot() == []


def test_the_threaded_scheduler_with_a_postgresql_checkpoint_shares_one_bucket_per_process(
        gateway: LatencyGateway, postgres: PostgresServer) -> None:
    rate = 5.0
    lazy = gw_dask.decide(tickets(12, 4), "{ticket}", QUESTIONS, gateway=GatewaySpec(gateway.base_url, KEY),
                          checkpoint=postgres.new_database(), requests_per_minute=rate * 60, burst=0.2,
                          concurrency=4, limiter_name=f"threads-{secrets.token_hex(4)}")
    out = lazy.compute(scheduler="threads", num_workers=4)
    assert (out["__status"] == "sent").all()
    times = gateway.arrival_times()
    assert len(times) == 12 and max_in_window(times, 1.0) <= 1 + rate
