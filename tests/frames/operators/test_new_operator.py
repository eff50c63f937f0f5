"""A new operator is one module on frames/operators/shared.py (docs/architecture.md, "Adding to a room"):
a toy one written here, on the real embedded gateway, gets the shared summary, the one column-clash check,
the run options (a checked `RunConfig`, as the accessor builds it at its door) and the checkpoint without
any code of its own for them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.operators.shared import OperatorFrame, OperatorSummary, check_text, finish, inner
from gwlab.frames.run.config import RunConfig
from gwlab.frames.specs import DecideSpec
from tests.support.gateways import RequestLog
from tests.support.tickets import DECISIONS, tickets_frame


async def flag(frame: pd.DataFrame, condition: str, config: RunConfig) -> OperatorFrame:
    """The toy operator: every row, with a yes/no column read at the vocabulary's cut."""
    check_text(condition, "condition")
    asked = DecideSpec("{ticket}", {"flag": {"type": tidy.NOUL, "instructions": condition}})
    answers = await asked.run(frame, inner(config))
    summary = OperatorSummary("flag", rows=len(frame))
    summary.add(answers.run)
    flagged = answers[tidy.column("flag", tidy.NOUL)].map(lambda p: None if pd.isna(p) else tidy.reads_yes(p))
    return OperatorFrame.of(finish(frame, pd.DataFrame({"flagged": flagged}), config), summary, answers)


@pytest.fixture
def log(gateway) -> RequestLog:
    return RequestLog(gateway.db)


async def test_a_toy_operator_built_on_the_shared_module_runs_counts_and_resumes(gateway, tmp_path: Path,
                                                                                   log: RequestLog) -> None:
    tickets = tickets_frame()
    options = {"checkpoint": str(tmp_path / "flag.sqlite"), "progress": False}
    async with AsyncGateway(gateway.base_url, gateway.api_key) as agw:
        mark = log.mark()
        out = await flag(tickets, "The customer was charged money", RunConfig.of("rows", {**options, "gateway": agw}))
        assert list(out.columns) == [*tickets.columns, "flagged"] and list(out.index) == list(tickets.index)
        assert out.run.operator == "flag" and out.run.sent == len(tickets) == len(log.settled(mark, DECISIONS))
        assert set(out["flagged"]) <= {True, False}
        again = await flag(tickets, "The customer was charged money",
                           RunConfig.of("rows", {**options, "gateway": agw}))
    assert again.run.cached == len(tickets) and again.run.sent == 0  # the checkpoint, for free
    assert list(again["flagged"]) == list(out["flagged"])


async def test_a_toy_operator_gets_the_one_clash_check_and_the_run_options_checks(gw: Gateway) -> None:
    tickets = tickets_frame().assign(flagged=1)
    with pytest.raises(InvalidRequest, match="already has column 'flagged'"):
        finish(tickets, pd.DataFrame({"flagged": [True] * len(tickets)}), RunConfig())
    with pytest.raises(InvalidRequest, match="concurrency"):
        await flag(tickets, "charged", RunConfig.of("rows", {"concurrency": 0, "gateway": gw}))
    with pytest.raises(InvalidRequest, match="condition"):
        await flag(tickets, " ", RunConfig(gateway=gw))
