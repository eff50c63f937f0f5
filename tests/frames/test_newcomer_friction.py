"""Issue 31 point 10: what misled a newcomer now says so: the filter's count, every aggregate row, a JSON
Schema typo, a deterministic `repeats=`, text stability by words, and a headline beside its n."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gwlab
from gwlab.client.gateway import Gateway
from gwlab.errors import InvalidRequest
from gwlab.frames.accessor import RepeatsWarning
from gwlab.frames.evaluation.labels import EvaluationWarning
from gwlab.frames.evaluation.repeats import REPEAT, _text_agreement, deterministic
from gwlab.frames.operators import FilterWarning
from gwlab.wire.schema import Schema
from tests.support.gateways import RequestLog
from tests.support.models import TEXT_MODEL
from tests.support.tickets import tickets_frame


def quiet(gw: Gateway, **options: Any) -> dict[str, Any]:
    return {"gateway": gw, "progress": False, "checkpoint": None, **options}


def test_filter_says_how_many_rows_it_kept_and_warns_when_none_pass(gw: Gateway) -> None:
    tickets = tickets_frame()
    some = tickets.gw.filter("The customer was charged money", state="{ticket}", **quiet(gw))
    assert some.run.kept == len(some) and f"kept {len(some)} of {len(tickets)}" in some.run.text()
    with pytest.warns(FilterWarning, match=f"kept 0 of {len(tickets)} rows: the highest P\\(true\\) is"):
        none = tickets.gw.filter("The customer was charged money", state="{ticket}", threshold=1.0 - 1e-12,
                                 **quiet(gw))
    assert len(none) == 0 and none.run.kept == 0 and "kept 0 of" in none.run.text()


def test_aggregate_keeps_a_row_whose_key_is_missing_in_its_own_group(gw: Gateway) -> None:
    frame = pd.DataFrame({"team": ["a", None, "a"], "note": ["login fails", "invoice missing", "page slow"]})
    out = frame.gw.aggregate("Name the theme in two words.", by="team", model=TEXT_MODEL, max_tokens=6,
                             max_input_tokens=4000, **quiet(gw))
    assert out["rows"].sum() == len(frame) and out.index.isna().sum() == 1


@pytest.mark.parametrize(("schema", "field"), [
    ({"type": "object", "proprties": {"order": {"type": "integer"}}}, "schema.proprties"),
    ({"type": "object", "propertys": {"order": {"type": "integer"}}}, "schema.propertys"),
    ({"type": "object"}, "schema.properties"),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "x"}, "schema.properties")])
def test_a_json_schema_without_properties_is_refused_naming_the_keyword(schema, field) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Schema.of(schema)
    assert caught.value.field == field
    assert Schema.of({"order": int}).fields == ["order"]  # a {field: type} mapping is still one


@pytest.mark.parametrize(("params", "said"), [
    ({"temperature": 0}, "temperature=0"), ({"top_k": 1}, "top_k=1"), ({"temperature": 0.7}, None), ({}, None)])
def test_deterministic_params_are_named(params, said) -> None:
    assert deterministic({"max_tokens": 8, **params}) == said


def test_repeats_on_a_greedy_model_warn_before_the_first_request(gw: Gateway, gateway) -> None:
    log = RequestLog(gateway.db)
    mark = log.mark()
    frame = pd.DataFrame({"q": ["Say yes.", "Say no."]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RepeatsWarning)  # a user who stops at the warning pays nothing
        with pytest.raises(RepeatsWarning, match="repeats=3 with temperature=0"):
            frame.gw.chat("{q}", model=TEXT_MODEL, max_tokens=4, params={"temperature": 0}, repeats=3, **quiet(gw))
    assert log.settled(mark) == []


def test_text_stability_by_words_ignores_punctuation_and_can_cut_to_the_first_words() -> None:
    index = pd.MultiIndex.from_product([[1, 2], [0, 1, 2]], names=["id", REPEAT])
    long = pd.DataFrame({"text": ["No, this is fine", "No. This is fine", "no this is FINE",
                                  "Yes we ship today", "Yes we ship tomorrow", None]}, index=index)
    assert _text_agreement(long, "text", "folded", None).tolist() == pytest.approx([1 / 3, 0.5])
    assert _text_agreement(long, "text", "words", None).tolist() == pytest.approx([1.0, 0.5])
    assert _text_agreement(long, "text", "words", 3).tolist() == pytest.approx([1.0, 1.0])


def test_an_evaluation_that_left_rows_out_shows_its_n_beside_the_headline() -> None:
    """Issue 31: labels that half match showed 0.889 on 27 of 59 rows as the figure."""
    questions = {"team": {"type": "choice", "criteria": {"billing": "", "tech": ""}}}
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"label": ["billing"] * 14 + ["tech"] * 13 + ["Finance"] * 32,
                          "team__choice": rng.choice(["billing", "tech"], 59)})
    with pytest.warns(EvaluationWarning, match="32 of 59 labels"):
        ev = gwlab.evaluate(frame, truth="label", pred="team__choice", questions=questions)
    acc = ev["team"]["accuracy"]
    assert f"team: accuracy {acc:.3f} on 27 of 59 rows (32 left out: label matches no option" in repr(ev)
    assert "27 of 59 rows" in ev._repr_html_()


def test_stability_of_a_sampled_text_run_by_words_agrees_at_least_as_often_as_by_folded_text(gw: Gateway) -> None:
    frame = pd.DataFrame({"q": ["Is the sky blue? Answer:", "Name a colour:", "Say hello:"]})
    out = frame.gw.chat("{q}", model=TEXT_MODEL, max_tokens=6, params={"temperature": 1.0}, repeats=3, **quiet(gw))
    folded, words = gwlab.stability(out), gwlab.stability(out, text="words", words=1)
    assert folded.loc["text", "rows"] == words.loc["text", "rows"] == len(frame)
    assert words.loc["text", "agreement"] >= folded.loc["text", "agreement"]  # fewer words can only merge answers
    assert folded.loc["text", "agreement"] == pytest.approx(out["text__agreement"].mean())
    with pytest.raises(InvalidRequest) as caught:
        gwlab.stability(out, text="letters")
    assert caught.value.field == "text"
