"""The checkpoint keeps one gateway's answers for that gateway: two real local gateways, one file."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gwlab.client.gateway import Gateway
from gwlab.frames.recipes import decisions_recipe
from gwlab.frames.store.checkpoint import Checkpoint, canonical, gateway_id
from tests.support.gateways import RequestLog, RunningGateway, start_gateway, stop_gateway
from tests.support.models import DECIDE_MODEL
from tests.support.tickets import DECISIONS, QUESTIONS, tickets_frame

MODEL = DECIDE_MODEL


@pytest.fixture(scope="module")
def second_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """Another `gwlab serve` with its own database and port, serving the same model ids and a user's GGUF:
    another model set, so another identity (an identical one on another port is the same gateway:
    tests/frames/store/test_checkpoint_survives_a_gateway_restart.py)."""
    from gwlab.local.engines import smollm2

    running = start_gateway(tmp_path_factory.mktemp("second") / "gateway.sqlite",
                            "--gguf", f"me/smollm2-copy={smollm2.gguf_path()}")
    yield running
    stop_gateway(running)


def decide(gateway: RunningGateway, checkpoint: Path, questions: dict = QUESTIONS, **client: object):
    with Gateway(gateway.base_url, gateway.api_key, **client) as gw:
        return tickets_frame().gw.decide("{ticket}", questions, gateway=gw, checkpoint=checkpoint, progress=False)


def test_answers_checkpointed_from_one_gateway_are_not_served_for_another(
        gateway: RunningGateway, second_gateway: RunningGateway, tmp_path: Path) -> None:
    checkpoint = tmp_path / "answers.sqlite"
    first_log, second_log = RequestLog(gateway.db), RequestLog(second_gateway.db)
    first_mark, second_mark = first_log.mark(), second_log.mark()
    before = time.time()
    first = decide(gateway, checkpoint)
    after = time.time()
    assert first.run.sent == 4 and first.run.cached_from is None

    second = decide(second_gateway, checkpoint)  # same rows, same questions, same model id
    assert second.run.sent == 4 and second.run.cached == 0
    assert len(second_log.settled(second_mark, DECISIONS)) == 4  # every request reached the second gateway
    assert (second["__status"] == "sent").all()

    again = decide(gateway, checkpoint)
    assert again.run.cached == 4 and again.run.sent == 0
    assert len(first_log.settled(first_mark, DECISIONS)) == 4  # the first gateway was asked once per row
    source = again.run.cached_from
    assert source["gateway"] == first.run.gateway == again.run.gateway and source["answers"] == 4
    assert first.run.gateway.startswith("local:") and second.run.gateway.startswith("local:")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(before)))
    assert stamp <= source["first_answered"] <= source["last_answered"] <= \
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(after + 1))
    assert again.attrs["gwlab_run"]["cached_from"] == dict(source)  # a plain dict there: it survives pickling
    assert f"given by {first.run.gateway}" in again.run.text()
    with sqlite3.connect(checkpoint) as conn:
        gateways = {row[0] for row in conn.execute("SELECT gateway FROM answers")}
    assert gateways == {first.run.gateway, second.run.gateway} and first.run.gateway != second.run.gateway


def test_a_checkpoint_from_before_gateways_were_keyed_serves_none_of_its_answers(
        gateway: RunningGateway, tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    body = decisions_recipe(QUESTIONS, MODEL).body(tickets_frame()["ticket"].iloc[0])
    old_key = hashlib.sha256(f"/decisions\n{canonical(body)}".encode()).hexdigest()  # the former key
    with sqlite3.connect(path) as conn:  # the former schema, with a made-up answer under the former key
        conn.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT, "
                     "response TEXT NOT NULL, request_id TEXT, input_tokens INTEGER, output_tokens INTEGER, "
                     "created REAL NOT NULL, writes INTEGER NOT NULL DEFAULT 1)")
        conn.execute("INSERT INTO answers VALUES (?, '/decisions', ?, '{}', 'req_old', 1, 0, 0, 1)", (old_key, MODEL))
    out = decide(gateway, path)
    assert out.run.sent == 4 and out.run.cached == 0  # the old answer was not served
    with Checkpoint(path) as checkpoint:
        assert len(checkpoint) == 5  # kept, never reachable


def test_a_decisions_route_fixed_by_the_user_is_another_source_of_answers(
        gateway: RunningGateway, tmp_path: Path) -> None:
    checkpoint, log = tmp_path / "answers.sqlite", RequestLog(gateway.db)
    questions = {"urgent": QUESTIONS["urgent"], "team": QUESTIONS["team"]}  # System One needs instructions
    decide(gateway, checkpoint, questions)
    mark = log.mark()
    system_one = {"decisions_path": "/systemone"}
    plain = decide(gateway, checkpoint, questions)
    other = decide(gateway, checkpoint, questions, dialect=system_one)  # same gateway, another route
    assert other.run.sent == 4 and len(log.settled(mark, "/v1/systemone")) == 4
    assert other.run.gateway == f"{plain.run.gateway} decisions_path=/systemone"
    assert decide(gateway, checkpoint, questions, dialect=system_one).run.cached == 4


def test_gateway_identity_ignores_case_default_ports_and_trailing_slashes() -> None:
    assert gateway_id("HTTP://Example.COM:80/v1/") == gateway_id("http://example.com/v1") == "http://example.com/v1"
    assert gateway_id("https://example.com:443/v1") == "https://example.com/v1"
    assert gateway_id("http://127.0.0.1:8001/v1") != gateway_id("http://127.0.0.1:8002/v1")
    assert gateway_id("HTTP://Host/v1/ decisions_path=/systemone") == "http://host/v1 decisions_path=/systemone"
