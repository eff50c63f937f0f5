"""`repeats=k` on the real local gateway: every repeat's answer, agreement across repeats, resuming
without paying twice; and the repeats scored pooled or reduced."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.frames.repeats import stability
from tests.support.gateways import RequestLog
from tests.support.models import TEXT_MODEL
from tests.support.tickets import DECISIONS, QUESTIONS, tickets_frame


@pytest.fixture(scope="module")
def gw(gateway) -> Iterator[Gateway]:
    client = Gateway(gateway.base_url, gateway.api_key)
    yield client
    client.close()


def _modal_share(answers: pd.Series) -> float:
    folded = [a.strip().casefold() for a in answers]
    return Counter(folded).most_common(1)[0][1] / len(folded)


def test_every_repeat_of_a_sampled_text_model_is_a_row_and_its_agreement_is_the_modal_share(gw: Gateway) -> None:
    frame = pd.DataFrame({"q": ["Is the sky green? Answer yes or no.", "Is fire hot? Answer yes or no."]},
                         index=pd.Index(["sky", "fire"], name="item"))
    out = frame.gw.chat("{q}", model=TEXT_MODEL, gateway=gw, repeats=3, max_tokens=3, params={"temperature": 1.5},
                        checkpoint=None, progress=False)
    long = out.repeats_frame()
    assert long.index.names == ["item", "repeat"] and len(long) == 6
    assert list(long.index.get_level_values("repeat")) == [0, 1, 2, 0, 1, 2]
    assert list(long["q"]) == list(frame["q"].repeat(3))  # the input columns join each repeat
    assert set(long["__status"]) == {"sent"} and long["__request_id"].nunique() == 6
    for item in frame.index:
        assert out.loc[item, "text__agreement"] == pytest.approx(_modal_share(long.loc[item, "text"]))
    table = stability(out)
    assert table.loc["text", "rows"] == 2
    assert table.loc["text", "changed"] == pytest.approx(float((out["text__agreement"] < 1).mean()))
    assert np.isnan(table.loc["text", "p_std"])  # text has no probabilities


def test_the_deterministic_decision_model_shows_zero_spread_across_repeats(gw: Gateway) -> None:
    out = tickets_frame().gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=None, progress=False)
    assert (out[["urgent__agreement", "team__agreement", "severity__agreement"]] == 1.0).all().all()
    table = stability(out)
    assert list(table.index) == ["urgent", "team", "severity"]
    assert (table["changed"] == 0).all() and (table["rows"] == 4).all()
    assert table["p_std_max"].to_numpy() == pytest.approx(0.0, abs=1e-9)
    long = out.repeats_frame()
    assert long.groupby(level="ticket_id")["team__choice"].nunique().eq(1).all()


def test_a_resumed_repeat_run_sends_nothing_and_returns_every_repeat_again(gateway, gw: Gateway,
                                                                           tmp_path: Path) -> None:
    log, path = RequestLog(gateway.db), tmp_path / "answers.sqlite"
    frame = tickets_frame().iloc[:2]
    first = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=path, progress=False)
    mark = log.mark()
    again = frame.gw.decide("{ticket}", QUESTIONS, gateway=gw, repeats=3, checkpoint=path, progress=False)
    assert log.settled(mark, path=DECISIONS) == [] and again.run.sent == 0 and again.run.cached == 6
    before, after = first.repeats_frame(), again.repeats_frame()
    assert set(before["__status"]) == {"sent"} and set(after["__status"]) == {"cached"}
    answers = [c for c in before.columns if "__" in c and not c.startswith("__")]
    pd.testing.assert_frame_equal(before[answers], after[answers])


def test_a_result_without_repeats_says_how_to_get_them(gw: Gateway) -> None:
    out = tickets_frame().iloc[:1].gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=None, progress=False)
    with pytest.raises(gwlab.InvalidRequest, match="repeats=k") as info:
        out.repeats_frame()
    assert info.value.field == "repeats"
