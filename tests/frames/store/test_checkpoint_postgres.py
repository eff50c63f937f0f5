"""The PostgreSQL checkpoint on a real server: the SQLite file's rules, plus claims that die with a worker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gwlab.client.gateway import Gateway
from gwlab.frames.store.checkpoint import mask_url, request_key
from gwlab.frames.store.stores import open_checkpoint
from tests.support import free_port
from tests.support.gateways import RequestLog
from tests.support.postgres import PostgresServer, postgres_server
from tests.support.tickets import DECISIONS, QUESTIONS, tickets_frame

psycopg = pytest.importorskip("psycopg")

KEY = request_key("http://gw/v1", "/decisions", {"state": "hello", "model": "m"})


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    yield from postgres_server()


def answer(store, key: str = KEY, text: str = '{"answers": {}}') -> None:
    store.put(key, "/decisions", "m", text, "req_1", 3, 0, "http://gw/v1")
    store.flush()


def test_the_schema_is_created_on_first_use_and_answers_outlive_the_connection(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('gwlab_answers')").fetchone()[0] is None
    with open_checkpoint(url) as store:
        answer(store)
    with open_checkpoint(url) as store:
        entry = store.get(KEY)
        assert entry is not None and entry.request_id == "req_1" and entry.input_tokens == 3
        assert entry.gateway == "http://gw/v1" and store.has_many([KEY, "other"]) == {KEY}
        assert len(store) == 1


async def test_a_request_claimed_by_one_worker_is_answered_once_for_both(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    first, second = open_checkpoint(url), open_checkpoint(url)  # two workers: two connections
    try:
        assert await first.claim(KEY) is None  # the first may send
        waiting = asyncio.ensure_future(second.claim(KEY))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # the second waits for the first's answer instead of sending
        answer(first)
        entry = await asyncio.wait_for(waiting, 30)
        assert entry is not None and entry.request_id == "req_1"
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT key, writes FROM gwlab_answers").fetchall() == [(KEY, 1)]
    finally:
        first.close()
        second.close()


async def test_a_failed_request_releases_its_claim(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    with open_checkpoint(url) as first, open_checkpoint(url) as second:
        assert await first.claim(KEY) is None
        first.release(KEY)  # the request failed: the row must stay askable by anyone
        assert await asyncio.wait_for(second.claim(KEY), 30) is None


async def test_the_claim_of_a_killed_worker_ends_with_its_connection(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    open_checkpoint(url).close()  # the table exists
    holder = subprocess.Popen(
        [sys.executable, "-c", "import asyncio, sys, time\nfrom gwlab.frames.store.stores import open_checkpoint\n"
         "store = open_checkpoint(sys.argv[1])\nassert asyncio.run(store.claim(sys.argv[2])) is None\n"
         "print('claimed', flush=True)\ntime.sleep(600)\n", url, KEY],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        with open_checkpoint(url) as store:
            waiting = asyncio.ensure_future(store.claim(KEY))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # a live worker's claim is respected
            os.kill(holder.pid, signal.SIGKILL)
            assert await asyncio.wait_for(waiting, 30) is None  # its claim died with it: ours now
    finally:
        holder.kill()
        holder.wait()


def test_the_password_of_the_url_appears_in_no_repr_summary_or_error(postgres: PostgresServer, gateway) -> None:
    url = postgres.new_database().replace("postgres@", "postgres:Sw0rdfish@")  # trust auth ignores it
    with open_checkpoint(url) as store:
        assert "Sw0rdfish" not in repr(store) and "Sw0rdfish" not in str(store.path)
        assert str(store.path) == mask_url(url) and ":***@" in store.path
    closed = f"postgresql://postgres:Sw0rdfish@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(ConnectionError) as failed:
        open_checkpoint(closed)
    assert "Sw0rdfish" not in str(failed.value) and "***" in str(failed.value)
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=url, progress=False)
    assert "Sw0rdfish" not in repr(out.run) and "Sw0rdfish" not in str(out.attrs)


def test_df_gw_with_a_postgresql_url_resumes_without_resending_and_stores_no_key(
        postgres: PostgresServer, gateway) -> None:
    url, log = postgres.new_database(), RequestLog(gateway.db)
    mark = log.mark()
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        first = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=url, progress=False)
        again = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=url, progress=False)
    assert first.run.sent == 4 and again.run.cached == 4 and again.run.sent == 0
    assert len(log.settled(mark, DECISIONS)) == 4
    cols = [c for c in first.columns if not c.startswith("__")]
    assert again[cols].equals(first[cols])
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT string_agg(t::text, ' ') FROM gwlab_answers t").fetchone()[0]
    assert gateway.api_key not in stored


def test_an_image_batch_checkpointed_in_postgresql_reruns_without_submitting(postgres: PostgresServer, gateway,
                                                                             tmp_path) -> None:
    """Task batches take the same store URL: the task ids live in PostgreSQL, so another kernel (or host)
    re-running the cell polls them instead of paying again."""
    import pandas as pd

    url = postgres.new_database()
    frame = pd.DataFrame({"scene": ["a lighthouse at dusk", "a boat in fog"]})
    options = {"checkpoint": url, "folder": tmp_path / "out", "progress": False, "poll_interval": 0.1,
               "timeout": 120, "size": "256x256"}
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        first = frame.gw.images("{scene}", gateway=gw, **options)
        again = frame.gw.images("{scene}", gateway=gw, **options)
    assert first.run.submitted == 2 and (first["status"] == "completed").all()
    assert again.run.submitted == 0 and again.run.resumed == 2
    assert list(again["task_id"]) == list(first["task_id"])
    assert first.run.checkpoint == mask_url(url)
