"""The request ledger: every call a row, as a DataFrame, optionally in SQLite; never keys or inputs."""

from __future__ import annotations

import httpx
import pandas as pd
import pytest

import gwlab
from gwlab.client.ledger import COLUMNS, Ledger
from tests.support.fakes import CANARY_KEY, chat_body

PROMPT = "a private prompt that must not be recorded"


def answer(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/models"):
        return httpx.Response(404, json={"error": {"message": "nope"}}, headers={"request-id": "req_404"})
    return httpx.Response(200, json=chat_body(), headers={"x-request-id": "req_chat"})


async def test_every_call_is_a_row_with_the_spec_columns(make_gateway):
    gw = make_gateway(answer)
    await gw.chat(PROMPT, model="m")
    with pytest.raises(gwlab.NotFound):
        await gw.models()
    frame = gw.usage
    assert list(frame.columns) == list(COLUMNS)
    ok, failed = frame.to_dict("records")
    assert (ok["method"], ok["path"], ok["family"], ok["model"], ok["status"], ok["request_id"]) == (
        "POST", "/chat/completions", "chat", "m", 200, "req_chat")
    assert (ok["input_tokens"], ok["output_tokens"], ok["streamed"], ok["complete"]) == (3, 1, False, True)
    assert (failed["status"], failed["request_id"], failed["error"]) == (404, "req_404", "NotFound")
    assert isinstance(frame["time"].dtype, pd.DatetimeTZDtype) and ok["latency_s"] >= 0
    text = frame.to_csv()
    assert PROMPT not in text and CANARY_KEY not in text


async def test_sqlite_ledger_keeps_rows_across_sessions(make_gateway, tmp_path):
    path = tmp_path / "ledger.sqlite"
    gw = make_gateway(answer, ledger_path=path)
    with gwlab.label_calls("day-1"):
        await gw.chat("hi", model="m")
    await gw.aclose()
    later = Ledger(path)
    frame = later.to_frame()
    assert len(later) == 0 and len(frame) == 1
    assert frame.loc[0, "run"] == "day-1" and frame.loc[0, "request_id"] == "req_chat"
    later.close()


def test_empty_ledger_gives_an_empty_frame_with_the_columns():
    frame = Ledger().to_frame()
    assert frame.empty and list(frame.columns) == list(COLUMNS)


def _entry(i: int, **overrides: object) -> dict[str, object]:
    return {"time": 1_800_000_000.0 + i, "method": "POST", "path": "/decisions", "family": "decisions",
            "model": "local/decide-e5-small", "status": 200, "request_id": f"req_{i:024x}", "latency_s": 0.05,
            "input_tokens": 400 + i % 50, "output_tokens": 0, **overrides}


def test_rows_come_back_exactly_as_recorded_missing_values_included() -> None:
    ledger = Ledger()
    recorded = [ledger.record(**_entry(0)),
                ledger.record(**_entry(1, status=None, request_id=None, model=None, input_tokens=None,
                                       error="ConnectionFailed", complete=False, run="night batch")),
                ledger.record(**_entry(2, request_id="req_é", streamed=True, complete=None, retries=3)),
                ledger.record(**_entry(3))]
    assert ledger.entries() == recorded
    frame = ledger.to_frame()
    assert frame["request_id"].isna().tolist() == [False, True, False, False]
    assert frame.loc[2, "request_id"] == "req_é" and frame.loc[3, "request_id"] == f"req_{3:024x}"
    assert frame["input_tokens"].isna().tolist() == [False, True, False, False]
    assert frame["complete"].isna().tolist() == [True, False, True, True] and not frame.loc[1, "complete"]
    assert frame["run"].tolist()[1] == "night batch" and frame["retries"].tolist() == [0, 0, 3, 0]


def test_a_call_costs_the_in_memory_ledger_about_a_hundred_bytes() -> None:
    # a million-row batch records a million calls: one object per call held ~340 bytes each
    import tracemalloc

    ledger, calls = Ledger(), 20_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(calls):
            ledger.record(**_entry(i))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / calls < 150


def test_a_ledger_file_written_before_the_ending_column_gets_it_added(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    old_columns = [name for name in COLUMNS if name != "ending"]
    with sqlite3.connect(path) as db:  # the table as an older gwlab created it, with one row
        db.execute(f"CREATE TABLE calls ({', '.join(old_columns)})")
        old = _entry(0, complete=1)
        db.execute(f"INSERT INTO calls ({', '.join(old)}) VALUES ({', '.join('?' * len(old))})", list(old.values()))
    db.close()
    ledger = Ledger(path)
    ledger.record(**_entry(1, complete=False, ending="capped"))
    frame = ledger.to_frame()
    ledger.close()
    assert list(frame.columns) == list(COLUMNS)
    assert frame["ending"].isna().tolist() == [True, False] and frame.loc[1, "ending"] == "capped"
    assert frame["complete"].tolist() == [True, False]
