"""The client and `df.gw` on the core install (no extras: pandas 3 without pyarrow), against a gateway.

`make test-core` runs this module in `.venv-core`, which has only gwlab's core dependencies; the full
suite runs it too, against the embedded gateway. Frames are built from Python lists, as a user's are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gwlab.client.gateway import Gateway
from gwlab.wire.models import DEFAULT_MODELS

TEXT, DECIDE = DEFAULT_MODELS["text"], DEFAULT_MODELS["decisions"]
QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "instructions": "Which team?",
                      "criteria": {"billing": "money, invoices", "tech": "bugs, outages"}}}
RUN = {"checkpoint": None, "progress": False}


@pytest.fixture
def questions_frame() -> pd.DataFrame:
    return pd.DataFrame({"q": ["What colour is the sky?", "Name a fruit."]})


def test_chat_on_a_frame_from_a_python_list_answers_every_row(core_gw: Gateway, questions_frame) -> None:
    out = questions_frame.gw.chat("{q}", model=TEXT, max_tokens=8, gateway=core_gw, **RUN)
    assert list(out["__status"]) == ["sent", "sent"] and out["__error"].isna().all()
    assert out["text"].map(lambda t: isinstance(t, str)).all()


def test_a_blank_cell_fails_its_row_on_a_python_backed_string_column(core_gw: Gateway) -> None:
    frame = pd.DataFrame({"q": pd.array(["Name a fruit.", "   "], dtype="string[python]")})
    out = frame.gw.chat("{q}", model=TEXT, max_tokens=8, gateway=core_gw, errors="coerce", **RUN)
    assert out["__status"].iloc[0] == "sent" and out["__status"].iloc[1] != "sent"


def test_decide_respond_and_messages_fill_their_columns(core_gw: Gateway, questions_frame) -> None:
    decided = questions_frame.gw.decide("{q}", QUESTIONS, gateway=core_gw, **RUN)
    assert set(decided["team__choice"]) <= {"billing", "tech"}
    assert np.allclose(decided[["team__p__billing", "team__p__tech"]].sum(axis=1), 1.0, atol=1e-6)
    for run in (questions_frame.gw.respond, questions_frame.gw.messages):
        out = run("{q}", model=TEXT, max_tokens=8, gateway=core_gw, **RUN)
        assert list(out["__status"]) == ["sent", "sent"] and (out["__input_tokens"] > 0).all()


def test_the_client_answers_chat_decide_and_models(core_gw: Gateway) -> None:
    assert {TEXT, DECIDE} <= set(core_gw.models())
    reply = core_gw.chat.create([{"role": "user", "content": "Say hi."}], model=TEXT, max_completion_tokens=8)
    assert isinstance(reply.text, str)
    result = core_gw.decide("The invoice is wrong", QUESTIONS, model=DECIDE)
    assert result["team"].choice in {"billing", "tech"}
    assert {"chat", "decisions"} <= set(core_gw.usage["family"])


def test_a_budget_stops_the_run_within_it(core_gw: Gateway) -> None:
    frame = pd.DataFrame({"t": [f"case {i}: the invoice is wrong by {i} euros" for i in range(12)]})
    out = frame.gw.decide("{t}", QUESTIONS, gateway=core_gw, budget=300, concurrency=1, **RUN)
    assert out.run.stopped == "budget" and 0 < out.run.input_tokens <= 300
    assert (out["__status"] == "not_run").any()


def test_a_checkpoint_answers_a_rerun_without_sending(core_gw: Gateway, questions_frame, tmp_path: Path) -> None:
    options = {"model": TEXT, "max_tokens": 8, "gateway": core_gw, "progress": False,
               "checkpoint": tmp_path / "answers.sqlite"}
    first = questions_frame.gw.chat("{q}", **options)
    again = questions_frame.gw.chat("{q}", **options)
    assert first.run.sent == 2 and (again.run.sent, again.run.cached) == (0, 2)
    assert list(again["text"]) == list(first["text"])
