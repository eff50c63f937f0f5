"""Run records on the embedded gateway: every df.gw run is recorded beside its answers, listed by
`gwlab.runs`, read back exactly by `gwlab.run_answers` without a request, compared by run id, append-only,
and never holding the API key; SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.run.records import PROCESS_ONLY
from gwlab.frames.store.checkpoint import Checkpoint
from gwlab.frames.store.stores import ENV_CHECKPOINT
from tests.support.gateways import RequestLog, RunningGateway
from tests.support.models import DECIDE_MODEL, TEXT_MODEL
from tests.support.postgres import PostgresServer, postgres_server
from tests.support.tickets import QUESTIONS, tickets_frame

# one call per row family, each on the four tickets with few tokens
FAMILIES: dict[str, Callable[..., pd.DataFrame]] = {
    "decisions": lambda df, **o: df.gw.decide("{ticket}", QUESTIONS, **o),
    "chat": lambda df, **o: df.gw.chat("{ticket}", model=TEXT_MODEL, max_tokens=3, **o),
    "responses": lambda df, **o: df.gw.respond("{ticket}", model=TEXT_MODEL, max_tokens=3,
                                               instructions="Reply in one word.", **o),
    "messages": lambda df, **o: df.gw.messages("{ticket}", model=TEXT_MODEL, max_tokens=3, **o),
}


def answers_of(result: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """The result's answer columns (those a run's answers hold), as a plain frame."""
    return pd.DataFrame(result)[list(like.columns)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_row_family_records_its_run_and_reads_its_answers_back_without_a_request(
        family: str, gw: Gateway, gateway: RunningGateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    out = FAMILIES[family](tickets_frame(), gateway=gw, checkpoint=store, progress=False)
    runs = gwlab.runs(store)
    assert list(runs["run_id"]) == [out.run.run_id] == [out.attrs["gwlab_run"]["run_id"]]
    row = runs.iloc[0]
    assert row["family"] == family and row["model"] == out.run.model and row["rows"] == 4
    assert row["status"] == "finished" and row["stopped"] is None and row["kept"] == str(store)
    assert f"run {out.run.run_id}, recorded in {store}" in out.run.text()
    assert row["input_tokens"] == out.run.input_tokens > 0 and row["cost"] == 0.0
    assert row["gateway"] == out.run.gateway and row["started"].tzname() == "UTC"
    assert row["template"]["prompt" if family != "decisions" else "state"] == "{ticket}"
    assert ("questions" in row["params"]) if family == "decisions" else row["params"]["max_tokens"] == 3
    log = RequestLog(gateway.db)
    mark = log.mark()
    again = gwlab.run_answers(out.run.run_id, store)
    pd.testing.assert_frame_equal(again, answers_of(out, again))  # the stored values: exact
    assert "ticket" not in again.columns and log.settled(mark) == []


def test_an_extract_run_reads_back_its_typed_fields_and_raw_answers_without_a_request(
        gw: Gateway, gateway: RunningGateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    schema = {"product": str, "order": int | None, "team": ["billing", "tech"], "angry": bool}
    out = tickets_frame().gw.extract("{ticket}", schema, model=TEXT_MODEL, max_tokens=48, gateway=gw,
                                     checkpoint=store, progress=False)
    log = RequestLog(gateway.db)
    mark = log.mark()
    again = gwlab.run_answers(out.run.run_id, store)
    assert list(again.columns[:4]) == list(schema) and "__raw" in again.columns
    pd.testing.assert_frame_equal(again, answers_of(out, again))  # typed as the run returned them
    assert str(again["team"].dtype) == "category" and log.settled(mark) == []


@pytest.mark.timeout(600)
def test_a_rerun_appends_a_record_that_points_at_the_answers_it_reused_and_sends_nothing(
        gw: Gateway, gateway: RunningGateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    first = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    log = RequestLog(gateway.db)
    mark = log.mark()
    second = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    assert log.settled(mark) == [] and second.run.cached == 4
    runs = gwlab.runs(store)
    assert list(runs["run_id"]) == [first.run.run_id, second.run.run_id]  # newest last
    assert list(runs["sent"]) == [4, 0] and list(runs["cached"]) == [0, 4]
    with sqlite3.connect(store) as conn:
        answers = conn.execute("SELECT count(*) FROM answers").fetchone()[0]
    assert answers == 4  # the second record points at the first run's answers: none stored twice
    again = gwlab.run_answers(second.run.run_id, store)
    pd.testing.assert_frame_equal(again, answers_of(second, again))
    assert (again["__status"] == "cached").all()


def test_run_records_are_append_only_in_the_sqlite_store(gw: Gateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    with sqlite3.connect(store) as conn:
        for statement in ("UPDATE runs SET record = '{}'", "DELETE FROM runs"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)


def test_error_rows_duplicates_a_prefix_and_a_multiindex_come_back_as_they_were(gw: Gateway,
                                                                               tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    frame = pd.DataFrame({"ticket": ["The app crashes", None, "The app crashes", "Refund please", "   "]},
                         index=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 3)],
                                                         names=["shop", "n"]))
    out = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False,
                          errors="coerce", prefix="v1_")
    assert list(out["v1___status"]) == ["sent", "error", "duplicate", "sent", "error"]
    again = gwlab.run_answers(out.run.run_id, store)
    pd.testing.assert_frame_equal(again, answers_of(out, again))
    assert gwlab.runs(store).iloc[0]["error_rows"] == 2


def test_a_stopped_run_is_recorded_as_stopped_with_why_and_its_rows_not_run(gw: Gateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False, pilot=2)
    row = gwlab.runs(store).iloc[-1]
    assert (row["status"], row["stopped"], row["not_run_rows"], row["sent"]) == ("stopped", "pilot", 2, 2)
    again = gwlab.run_answers(out.run.run_id, store)
    pd.testing.assert_frame_equal(again, answers_of(out, again))
    assert list(again["__status"]) == ["sent", "sent", "not_run", "not_run"]


def test_a_stopped_runs_record_keys_the_asks_it_never_reached_as_the_run_that_reaches_them_does(
        gw: Gateway, tmp_path: Path) -> None:
    """The run record reuses the keys the run took its asks with and keys only the asks it never reached,
    so the two kinds must agree: the full re-run takes all four asks itself."""
    store = tmp_path / "answers.sqlite"
    stopped = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False, pilot=2)
    full = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False)
    assert (full.run.sent, full.run.cached) == (2, 2)
    with Checkpoint(store) as kept:
        keys = [json.loads(kept.run_detail(run.run.run_id) or "{}")["answers"]["keys"] for run in (stopped, full)]
    assert keys[0] == keys[1] and all(len(k) == 64 for k in keys[0][0])


def test_a_run_with_repeats_reads_back_its_combined_answers_and_spreads(gw: Gateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=store, progress=False, repeats=2)
    again = gwlab.run_answers(out.run.run_id, store)
    assert {"urgent__noul__std", "__repeats"} <= set(again.columns)
    pd.testing.assert_frame_equal(again, answers_of(out, again))
    assert gwlab.runs(store).iloc[-1]["repeats"] == 2


@pytest.mark.timeout(600)
def test_a_task_batch_is_recorded_and_its_task_columns_read_back_as_that_run_ended(
        gw: Gateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    frame = pd.DataFrame({"scene": ["a cat, records", "a boat, records"]}, index=["x", "y"])
    out = frame.gw.images("{scene}", gateway=gw, folder=tmp_path / "out", checkpoint=store, progress=False,
                          poll_interval=0.1, timeout=120, size="256x256", prefix="img_")
    row = gwlab.runs(store).iloc[-1]
    assert row["run_id"] == out.run.run_id and row["family"] == "images" and row["sent"] == 2
    assert row["template"] == {"prompt": "{scene}"} and row["params"]["size"] == "256x256"
    again = gwlab.run_answers(out.run.run_id, store)
    pd.testing.assert_frame_equal(again, answers_of(out, again))
    assert again.columns[0] == "img_task_id" and (again["img_status"] == "completed").all()


def test_no_api_key_is_anywhere_in_the_store(gw: Gateway, gateway: RunningGateway, tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    for call in FAMILIES.values():
        call(tickets_frame(), gateway=gw, checkpoint=store, progress=False)
    with sqlite3.connect(store) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "runs" in tables and conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 4
        for table in tables:
            columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
            for column in columns:
                cells = conn.execute(f"SELECT {column} FROM {table}").fetchall()
                assert not any(gateway.api_key[10:] in str(cell) for (cell,) in cells), (table, column)
    for path in tmp_path.glob("answers.sqlite*"):  # the file, its WAL and shared memory, as bytes
        assert gateway.api_key[10:].encode() not in path.read_bytes()


@pytest.mark.timeout(600)
def test_two_recorded_runs_are_compared_by_run_id_as_their_frames_are(
        gw: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CHECKPOINT, str(tmp_path / "default.sqlite"))  # run ids are read from the default
    tickets = tickets_frame()
    labels = pd.DataFrame({"urgent": [True, False, False, False], "team": ["tech", "billing", "billing", "tech"]},
                          index=tickets.index)
    a, b = (tickets.gw.decide(prompt, QUESTIONS, gateway=gw, progress=False, checkpoint="auto")
            for prompt in ("{ticket}", "Support ticket: {ticket}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)  # 4 rows: small, and said so
        by_id = gwlab.compare(a.run.run_id, b.run.run_id, truth=labels)
        by_frame = gwlab.compare(a, b, truth={"urgent": labels["urgent"], "team": labels["team"]})
    pd.testing.assert_frame_equal(by_id.table, by_frame.table)
    pd.testing.assert_frame_equal(by_id.flips, by_frame.flips)
    assert set(by_id.table.index.get_level_values("question")) == {"urgent", "team"}
    assert list(gwlab.runs()["run_id"]) == [a.run.run_id, b.run.run_id]


def test_a_run_without_checkpoint_is_recorded_for_this_process_only_and_says_so(
        gw: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "default.sqlite"
    monkeypatch.setenv(ENV_CHECKPOINT, str(default))
    out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False)
    assert out.run.recorded == PROCESS_ONLY and out.run.run_id is not None
    assert f"run {out.run.run_id}, recorded {PROCESS_ONLY}" in repr(out)  # said where the user looks
    mine = gwlab.runs(False)
    assert mine.iloc[-1]["run_id"] == out.run.run_id and mine.iloc[-1]["kept"] == PROCESS_ONLY
    assert gwlab.runs().empty and not default.exists()  # reading the default store creates no file
    with pytest.raises(InvalidRequest, match="process only") as raised:
        gwlab.run_answers(out.run.run_id)
    assert raised.value.field == "run_id"


def test_an_unknown_run_id_fails_naming_the_field(tmp_path: Path) -> None:
    store = tmp_path / "answers.sqlite"
    for bad in ("20990101T000000Z-00000000", "", None):
        with pytest.raises(InvalidRequest) as raised:
            gwlab.run_answers(bad, store)  # type: ignore[arg-type]
        assert raised.value.field == "run_id"


def test_a_label_frame_without_a_question_column_fails_naming_truth() -> None:
    answers = pd.DataFrame({"urgent__noul": np.linspace(0, 1, 4)})
    with pytest.raises(InvalidRequest, match="column named after a question") as raised:
        gwlab.compare(answers, answers, truth=pd.DataFrame({"label": [True] * 4}))
    assert raised.value.field == "truth"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    yield from postgres_server()


@pytest.mark.timeout(600)
def test_the_postgresql_store_records_runs_and_reads_their_answers_back(
        postgres: PostgresServer, gw: Gateway, gateway: RunningGateway) -> None:
    psycopg = pytest.importorskip("psycopg")
    url = postgres.new_database()
    first = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=url, progress=False)
    second = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=url, progress=False)
    runs = gwlab.runs(url)
    assert list(runs["run_id"]) == [first.run.run_id, second.run.run_id] and list(runs["cached"]) == [0, 4]
    for out in (first, second):
        again = gwlab.run_answers(out.run.run_id, url)
        pd.testing.assert_frame_equal(again, answers_of(out, again))
    with psycopg.connect(url) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'gwlab_%'")]
        assert "gwlab_runs" in tables
        for table in tables:
            text = str(conn.execute(f"SELECT * FROM {table}").fetchall())
            assert gateway.api_key[10:] not in text, table
    assert DECIDE_MODEL in set(runs["model"])
