"""df.gw.extract against a loopback stub gateway that answers faults on purpose (issue 24).

The stub (tests/extractkit.py) answers by the row's prompt: `good`, `full`, `fix-<fault>` (the fault,
then a valid answer when re-asked), `never`; it records every request body so the request shapes can be
checked.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor  # registers df.gw
from gwlab.client.dialect import forget
from gwlab.errors import BadRequest, InvalidRequest
from gwlab.frames.extract import StructuredFallbackWarning, dtypes
from gwlab.frames.specs import ExtractRunSummary
from gwlab.wire.schema import Schema
from tests.support.extract import FAULTS, KEY, REQUESTS, SCHEMA, answering, stub_server


@pytest.fixture(scope="module")
def stub() -> Iterator[gwlab.Gateway]:
    with stub_server() as url, gwlab.Gateway(url, KEY) as gw:
        yield gw


def _run(stub, prompts, schema=SCHEMA, **options):
    REQUESTS.clear()
    frame = pd.DataFrame({"text": prompts}, index=pd.Index(range(10, 10 + len(prompts)), name="id"))
    options = {"checkpoint": None, "progress": False, "max_tokens": 64, **options}
    return frame.gw.extract("{text}", schema, gateway=stub, **options)


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_each_family_returns_one_typed_column_per_field(stub, protocol):
    out = _run(stub, ["good one", "good two"], protocol=protocol)
    assert list(out.columns[:4]) == ["text", "product", "order", "sentiment"]
    assert out["product"].dtype == "string" and out["order"].dtype == "Int64"
    assert list(out["sentiment"].cat.categories) == ["positive", "neutral", "negative"]
    assert out.loc[10, "order"] == 42 and out.loc[11, "sentiment"] == "negative"
    assert out["__status"].tolist() == ["sent", "sent"] and out["__error"].isna().all()


def test_the_request_bodies_have_each_protocols_documented_structured_output_shape(stub):
    shapes = {}
    for protocol in ("chat", "responses", "messages"):
        _run(stub, ["good"], protocol=protocol)
        [request] = REQUESTS
        shapes[protocol] = request["body"]
    strict = shapes["chat"]["response_format"]
    assert strict["type"] == "json_schema" and strict["json_schema"]["strict"] is True
    assert strict["json_schema"]["schema"]["additionalProperties"] is False
    assert shapes["chat"]["max_completion_tokens"] == 64
    text_format = shapes["responses"]["text"]["format"]
    assert text_format["type"] == "json_schema" and text_format["schema"]["required"] == list(SCHEMA)
    tool = shapes["messages"]["tools"][0]
    assert shapes["messages"]["tool_choice"] == {"type": "tool", "name": tool["name"]}
    assert tool["input_schema"]["properties"]["order"]["type"] == ["integer", "null"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_invalid_answer_is_reasked_with_its_error_then_accepted(stub, fault):
    out = _run(stub, [f"fix-{fault} please"])
    assert out.loc[10, "__status"] == "sent" and out.loc[10, "order"] == 42
    assert out.loc[10, "__reasks"] == 1
    assert len(REQUESTS) == 2
    reask = REQUESTS[1]["body"]["messages"]
    assert reask[1]["role"] == "assistant" and reask[1]["content"] == FAULTS[fault]
    assert "invalid" in reask[2]["content"]
    assert out.loc[10, "__input_tokens"] == 20 and out.loc[10, "__output_tokens"] == 10  # both asks billed
    assert out.run.reasked == 1 and "1 re-asked" in repr(out) and out.run.input_tokens == 20


def test_a_row_still_invalid_after_its_reasks_keeps_its_raw_text_and_the_error_and_invents_nothing(stub):
    out = _run(stub, ["never", "good"], max_reasks=2)
    assert len(REQUESTS) == 4
    row = out.loc[10]
    assert row["__status"] == "error" and "not valid JSON" in row["__error"]
    assert row["__raw"] == FAULTS["badjson"] and row["__reasks"] == 2
    assert pd.isna(row["product"]) and pd.isna(row["order"]) and pd.isna(row["sentiment"])
    assert out.loc[11, "__status"] == "sent"


def test_with_no_reasks_an_invalid_row_is_sent_once(stub):
    out = _run(stub, ["fix-missing"], max_reasks=0)
    assert len(REQUESTS) == 1 and out.loc[10, "__status"] == "error"
    assert "'sentiment' is a required property" in out.loc[10, "__error"]


def test_a_resumed_run_pays_for_no_ask_again_reasks_included(stub, tmp_path):
    path = tmp_path / "answers.sqlite"
    first = _run(stub, ["fix-extra", "never"], checkpoint=path)
    assert len(REQUESTS) == 4
    again = _run(stub, ["fix-extra", "never"], checkpoint=path)
    assert REQUESTS == []
    assert again["__status"].tolist() == ["cached", "error"]
    assert again.loc[10, "order"] == first.loc[10, "order"] == 42 and again.loc[10, "__input_tokens"] == 20


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_gateway_refusing_structured_output_gets_the_schema_in_the_prompt_said_once_and_remembered(protocol):
    with stub_server() as url, gwlab.Gateway(url.replace("/v1", "/plain/v1"), KEY) as plain:
        forget(plain.base_url)
        with pytest.warns(StructuredFallbackWarning, match="no structured output"):
            first = _run(plain, ["good a", "good b"], protocol=protocol)
        assert first["__status"].tolist() == ["sent", "sent"] and first["order"].tolist() == [42, 42]
        assert "asked in the prompt" in repr(first) and "refused" in first.run.structured
        refused = [r for r in REQUESTS if "JSON Schema" not in json.dumps(r["body"])]
        assert 1 <= len(refused) <= 2  # the rows in flight when the 400 came; each resent in the prompt
        second = _run(plain, ["good c"], protocol=protocol)  # remembered: no native ask, no warning
        assert len(REQUESTS) == 1 and "JSON Schema" in json.dumps(REQUESTS[0]["body"])
        assert "asked in the prompt" in second.run.structured
        forget(plain.base_url)


def test_native_forced_on_a_gateway_without_structured_output_raises_its_400():
    with (stub_server() as url, gwlab.Gateway(url.replace("/v1", "/plain/v1"), KEY) as plain,
          pytest.raises(BadRequest, match="response_format")):
        _run(plain, ["good"], structured="native")


def test_a_gateway_with_structured_output_is_asked_natively_and_run_says_nothing(stub):
    out = _run(stub, ["good"])
    assert "response_format" in REQUESTS[0]["body"] and out.run.structured is None
    assert isinstance(out.run, ExtractRunSummary) and out.attrs["gwlab_run"]["structured"] is None  # typed, once


def test_prompt_mode_puts_the_schema_in_the_prompt_and_sends_no_structured_field(stub):
    out = _run(stub, ["good"], structured="prompt")
    body = REQUESTS[0]["body"]
    assert "response_format" not in body and "JSON Schema" in body["messages"][0]["content"]
    assert out.loc[10, "product"] == "kettle"


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_native_extract_tells_the_model_an_unstated_optional_field_is_null_never_a_guess(stub, protocol):
    _run(stub, ["good"], protocol=protocol)
    body = REQUESTS[0]["body"]
    [first] = [t for t in body.get("messages") or body["input"] if t["role"] == "user"]
    assert first["content"].startswith("good\n\n")
    assert "does not state order, answer null" in first["content"] and "never guess" in first["content"]


def test_a_schema_with_no_optional_field_asks_for_no_null(stub):
    _run(stub, ["good"], schema={"product": str, "order": int, "sentiment": ["positive", "neutral", "negative"]})
    assert REQUESTS[0]["body"]["messages"][0]["content"] == "good"


def test_the_prompt_form_carries_the_same_absent_rule(stub):
    _run(stub, ["good"], structured="prompt")
    content = REQUESTS[0]["body"]["messages"][0]["content"]
    assert "JSON Schema" in content and content.count("does not state order, answer null") == 1


def test_every_mapping_type_reaches_its_nullable_dtype(stub):
    schema = {"product": str, "order": int, "price": float | None, "refund": bool | None, "when": dt.date | None,
              "tags": list[str] | None, "sentiment": ["positive", "neutral", "negative"]}
    out = _run(stub, ["full", "good"], schema=schema, max_reasks=0)
    # the second answer lacks price, refund, when, tags: invalid, its fields missing, dtypes still typed
    assert out["__status"].tolist() == ["sent", "error"]
    assert out.loc[10, ["order", "price", "refund"]].tolist() == [42, 9.5, True]
    assert out.loc[10, "when"] == pd.Timestamp("2024-03-01") and out.loc[10, "tags"] == ["late", "broken"]
    assert out.loc[11, ["price", "refund", "when", "tags"]].isna().all()
    assert dict(out.dtypes[["order", "price", "refund", "when", "tags"]].astype(str)) == {
        "order": "Int64", "price": "Float64", "refund": "boolean", "when": "datetime64[ns]", "tags": "object"}


def test_a_field_named_as_an_input_column_is_refused_before_sending_unless_prefixed(stub):
    REQUESTS.clear()
    frame = pd.DataFrame({"text": ["good"], "product": ["x"]})
    with pytest.raises(InvalidRequest, match="'product'"):
        frame.gw.extract("{text}", SCHEMA, gateway=stub, checkpoint=None, progress=False)
    assert REQUESTS == []
    out = frame.gw.extract("{text}", SCHEMA, gateway=stub, checkpoint=None, progress=False, prefix="x_")
    assert out.loc[0, "x_product"] == "kettle" and out.loc[0, "product"] == "x"


def test_a_field_named_like_a_run_column_is_refused_naming_it(stub):
    with pytest.raises(InvalidRequest) as info:
        _run(stub, ["good"], schema={"__error": str})
    assert info.value.field == "schema.__error" and REQUESTS == []


def test_a_params_structured_field_that_schema_sets_is_refused_naming_it(stub):
    with pytest.raises(InvalidRequest) as info:
        _run(stub, ["good"], params={"response_format": {"type": "json_object"}})
    assert info.value.field == "params.response_format"


def test_a_pydantic_model_schema_fills_its_fields(stub):
    pydantic = pytest.importorskip("pydantic")

    class Ticket(pydantic.BaseModel):
        product: str
        order: int | None = None
        sentiment: str

    out = _run(stub, ["good"], schema=Ticket, protocol="messages")
    assert out.loc[10, "product"] == "kettle" and out.loc[10, "order"] == 42
    assert REQUESTS[0]["body"]["tool_choice"]["name"] == "Ticket"


def test_dask_extract_has_the_typed_meta_and_a_second_compute_pays_nothing(stub, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    from gwlab.frames import dask as gw_dask

    frame = pd.DataFrame({"text": ["good a", "fix-extra b", "good c", "never d"]})
    lazy = gw_dask.extract(dd.from_pandas(frame, npartitions=2), "{text}", SCHEMA, max_tokens=64, gateway=stub,
                           checkpoint=tmp_path / "answers.sqlite")
    assert lazy.dtypes["order"] == "Int64" and lazy.dtypes["sentiment"] == "category"
    REQUESTS.clear()
    first = lazy.compute(scheduler="sync")
    assert len(REQUESTS) == 6 and first["order"].tolist()[:3] == [42, 42, 42]
    assert first["__status"].tolist() == ["sent", "sent", "sent", "error"]
    REQUESTS.clear()
    again = lazy.compute(scheduler="sync")
    assert REQUESTS == [] and again["__status"].tolist() == ["cached", "cached", "cached", "error"]


def test_each_field_kind_has_its_nullable_pandas_dtype_in_frames_not_wire() -> None:
    mapping = {"product": str, "order": int | None, "price": float, "refund": bool,
               "sentiment": ["positive", "neutral", "negative"], "when": dt.date, "at": dt.datetime,
               "tags": list[str]}
    assert dtypes(Schema.of(mapping)) == {
        "product": "string", "order": "Int64", "price": "Float64", "refund": "boolean", "sentiment": "category",
        "when": "datetime64[ns]", "at": "datetime64[ns]", "tags": "object"}


def test_a_date_beyond_what_a_date_column_holds_is_an_invalid_answer_not_a_crash():
    """A local model once answered "4321-04-04": valid JSON of the schema, but no datetime64[ns] holds it,
    and the whole run stopped converting its column. It is an invalid answer: re-asked, then an error row."""
    schema = {"product": str, "when": dt.date | None}
    table = {"far": {"product": "kettle", "when": "4321-04-04"}, "near": {"product": "kettle", "when": "2262-04-11"}}
    with answering(table) as url, gwlab.Gateway(url, KEY) as gw:
        frame = pd.DataFrame({"text": ["far", "near"]})
        out = frame.gw.extract("{text}", schema, gateway=gw, checkpoint=None, progress=False, max_tokens=64)
    far = out.loc[0]
    assert far["__status"] == "error" and "'4321-04-04' is not a date between 1677-09-22" in far["__error"]
    assert pd.isna(far["when"]) and pd.isna(far["product"]) and far["__reasks"] == 1 and "4321" in far["__raw"]
    assert out["when"].dtype == "datetime64[ns]" and out.loc[1, "when"] == pd.Timestamp("2262-04-11")
