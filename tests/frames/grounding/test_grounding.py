"""`grounding=` of df.gw.extract and of `schema=` single calls, against a hosted-style stub whose answers
quote the text, paraphrase it and invent (tests/support/extract.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor  # registers df.gw
from gwlab.errors import InvalidRequest
from gwlab.frames.evaluation.labels import EvaluationWarning
from tests.support.extract import KEY, REQUESTS, answering

QUOTES = "Hi, order BRW 10421 cost $29.90 on 15 Jan 2026. I want a refund."
PARAPHRASE = "The kettle leaks. I'd like my money back, order BRW-20001."
INVENTS = "Where is my parcel? It has been ten days."
LATE = "My parcel is late. Where is it?"
SCRIPT = "<script>alert('x')</script> order BRW-30003 & <b>more</b>"
WRONG_FIELD = "Hi, one lamp came broken and the box is blue. I paid 18 euros."
ANSWERS = {
    QUOTES: {"order": "BRW-10421", "amount": 29.9, "day": "2026-01-15", "ask": "refund", "refund": True},
    PARAPHRASE: {"order": "BRW-20001", "amount": None, "day": None, "ask": "refund", "refund": True},
    INVENTS: {"order": "BRW-12345", "amount": 49.99, "day": "2026-01-01", "ask": "parcel location",
              "refund": False},
    LATE: {"order": "BRW-777", "ask": "parcel location"},  # the answer of a two-field Pydantic model
    WRONG_FIELD: {"order_id": "18", "name": "blue", "amount": 18, "count": 1},  # the text's words, wrong fields
    SCRIPT: {"order": "BRW-30003", "amount": None, "day": None, "ask": "<img src=x onerror=alert(1)>",
             "refund": False},
}
SCHEMA = {"type": "object", "properties": {
    "order": {"type": ["string", "null"]}, "amount": {"type": ["number", "null"]},
    "day": {"type": ["string", "null"], "format": "date"}, "ask": {"type": "string"},
    "refund": {"type": "boolean"}}}

KINDS = {"order_id": str | None, "name": str | None, "amount": float | None, "count": int | None}


@pytest.fixture(scope="module")
def stub() -> Iterator[gwlab.Gateway]:
    with answering(ANSWERS) as url, gwlab.Gateway(url, KEY) as gw:
        yield gw


def tickets(*texts: str) -> pd.DataFrame:
    return pd.DataFrame({"text": list(texts), "kind": "ticket"}, index=pd.Index(range(1, len(texts) + 1), name="id"))


def extract(stub, frame, schema=SCHEMA, **options):
    options = {"checkpoint": None, "progress": False, "max_tokens": 64, **options}
    return frame.gw.extract("Message: {text}", schema, gateway=stub, **options)


def test_quoted_values_are_exact_with_spans_into_the_source_text(stub):
    out = extract(stub, tickets(QUOTES))
    row = out.loc[1]
    for field, written in (("order", "BRW 10421"), ("amount", "29.90"), ("day", "15 Jan 2026")):
        assert row[f"{field}__grounding"] == "exact"
        start, end = row[f"{field}__span"]
        assert QUOTES[start:end] == written
    assert row["ask"] == "refund" and QUOTES[slice(*row["ask__span"])] == "refund"
    assert pd.isna(row["__notes"])


def test_paraphrased_and_invented_values_are_flagged_and_kept_by_default(stub):
    out = extract(stub, tickets(QUOTES, PARAPHRASE, INVENTS))
    assert out["order__grounding"].tolist() == ["exact", "exact", "not_found"]
    assert out.loc[3, "order"] == "BRW-12345" and out.loc[3, "amount"] == 49.99  # flagged, kept
    assert out.loc[2, "ask__grounding"] == "not_found"  # right, yet paraphrased ("money back")
    assert out.loc[3, "ask__grounding"] == "not_found"  # "parcel location": a paraphrase is not found
    assert pd.isna(out.loc[2, "amount__grounding"]) and out.loc[2, "amount__span"] is None  # no value
    assert "order: 'BRW-12345' not found in text (kept, flagged)" in out.loc[3, "__notes"]
    assert str(out["order__grounding"].dtype) == "category"


def test_drop_makes_ungrounded_values_missing_with_the_reason_in_the_notes(stub):
    out = extract(stub, tickets(QUOTES, INVENTS), grounding="drop")
    assert out.loc[1, "order"] == "BRW-10421" and out.loc[1, "amount"] == 29.9
    row = out.loc[2]
    assert pd.isna(row["order"]) and pd.isna(row["amount"]) and pd.isna(row["day"]) and pd.isna(row["ask"])
    assert row["order__grounding"] == "not_found" and '"BRW-12345"' in row["__raw"]
    assert "order: 'BRW-12345' not found in text (dropped)" in row["__notes"]
    assert out["amount"].dtype == "Float64" and out["day"].dtype == "datetime64[ns]"


def test_a_value_written_only_as_another_kind_of_span_is_misplaced_flagged_or_dropped(stub):
    out = extract(stub, tickets(WRONG_FIELD), schema=KINDS)
    row = out.loc[1]
    assert [row[f"{f}__grounding"] for f in KINDS] == ["misplaced", "misplaced", "exact", "fuzzy"]
    assert WRONG_FIELD[slice(*row["order_id__span"])] == "18"  # where the text writes it: as an amount
    assert row["order_id"] == "18" and row["name"] == "blue"  # "flag" keeps them
    assert "order_id: '18' misplaced: text writes it only as something other than an identifier (kept, " \
           "flagged)" in row["__notes"] and "name: 'blue' misplaced" in row["__notes"]
    assert "count" not in row["__notes"]  # a plain number may be a count: "one" grounds it
    dropped = extract(stub, tickets(WRONG_FIELD), schema=KINDS, grounding="drop").loc[1]
    assert pd.isna(dropped["order_id"]) and pd.isna(dropped["name"]) and dropped["amount"] == 18
    assert "(dropped)" in dropped["__notes"]
    page = gwlab.show_grounding(out)._repr_html_()
    assert "✗ misplaced" in page and ">18</mark>" in page and ">blue</mark>" not in page  # only the amount's span


def test_a_kind_the_flag_names_overrides_the_fields_name_and_is_not_sent(stub):
    schema = {"type": "object", "properties": {
        "order_id": {"type": ["string", "null"]}, "name": {"type": ["string", "null"], "x-grounding": "string"},
        "amount": {"type": ["number", "null"]}, "count": {"type": ["integer", "null"], "x-grounding": "amount"}}}
    row = extract(stub, tickets(WRONG_FIELD), schema=schema).loc[1]
    assert row["name__grounding"] == "exact"  # "blue": any text, as the flag says
    assert row["count__grounding"] == "misplaced"  # "one" is no amount: no currency beside it
    sent = REQUESTS[-1]["body"]["response_format"]["json_schema"]["schema"]
    assert "x-grounding" not in str(sent) and set(sent["properties"]) == set(schema["properties"])


def test_field_scoring_counts_a_misplaced_value_as_ungrounded(stub):
    out = extract(stub, tickets(WRONG_FIELD), schema=KINDS)
    out["true_order_id"], out["true_amount"] = [None], [18.0]
    with pytest.warns(EvaluationWarning, match="fewer than 10 rows"):
        table = gwlab.evaluate(out, truth={"order_id": "true_order_id", "amount": "true_amount"},
                               kind="fields").metrics
    assert table.loc["order_id", ["grounded", "ungrounded", "invented_ungrounded"]].tolist() == [0, 1, 1]
    assert table.loc["amount", ["grounded", "ungrounded", "right_ungrounded"]].tolist() == [1, 0, 0]


def test_a_single_schema_call_drops_a_misplaced_value(stub):
    reply = stub.chat.create(f"Message: {WRONG_FIELD}", model="m", schema=KINDS, grounding="drop")
    assert reply.grounding["order_id"].status == "misplaced" and reply.parsed["order_id"] is None
    assert reply.parsed["amount"] == 18


def test_off_aligns_nothing(stub):
    out = extract(stub, tickets(INVENTS), grounding="off")
    assert not [c for c in out.columns if "__grounding" in c or "__span" in c] and "__notes" not in out


def test_booleans_categories_and_flagged_fields_are_exempt_and_the_flag_is_not_sent(stub):
    schema = {"type": "object", "properties": {
        "order": {"type": ["string", "null"]}, "refund": {"type": "boolean"},
        "ask": {"type": "string", "x-grounding": False}}}
    out = extract(stub, tickets(INVENTS), schema=schema)
    assert "order__grounding" in out and "refund__grounding" not in out and "ask__grounding" not in out
    sent = REQUESTS[-1]["body"]["response_format"]["json_schema"]["schema"]
    assert "x-grounding" not in str(sent) and set(sent["properties"]) == {"order", "refund", "ask"}
    enum = {"sentiment": ["positive", "negative"], "order": str | None}
    out = extract(stub, tickets(INVENTS), schema=enum)
    assert "sentiment__grounding" not in out and "order__grounding" in out


def test_a_prompt_reading_several_columns_needs_source_to_ground(stub):
    frame = tickets(QUOTES)
    out = frame.gw.extract("{kind}: {text}", SCHEMA, gateway=stub, checkpoint=None, progress=False)
    assert "order__grounding" not in out  # the default grounds nothing it cannot point into
    with pytest.raises(InvalidRequest, match="source"):
        frame.gw.extract("{kind}: {text}", SCHEMA, gateway=stub, grounding="flag", checkpoint=None)
    out = frame.gw.extract("{kind}: {text}", SCHEMA, gateway=stub, source="text", checkpoint=None, progress=False)
    assert out.loc[1, "order__grounding"] == "exact"


@pytest.mark.parametrize(("options", "field"), [({"grounding": "maybe"}, "grounding"),
                                                ({"source": "nope"}, "source")])
def test_bad_grounding_options_name_their_field(stub, options, field):
    with pytest.raises(InvalidRequest) as caught:
        extract(stub, tickets(QUOTES), **options)
    assert caught.value.field == field


def test_grounding_columns_survive_the_checkpoint_and_run_answers(stub, tmp_path):
    store = tmp_path / "frames.sqlite"
    frame = tickets(QUOTES, INVENTS)
    first = extract(stub, frame, grounding="drop", checkpoint=store)
    sent = len(REQUESTS)
    again = extract(stub, frame, grounding="drop", checkpoint=store)
    assert len(REQUESTS) == sent and (again["__status"] == "cached").all()
    columns = ["order", "order__grounding", "order__span", "amount", "amount__grounding", "__notes"]
    pd.testing.assert_frame_equal(again[columns], first[columns])
    back = gwlab.run_answers(first.run.run_id, store)
    assert len(REQUESTS) == sent
    pd.testing.assert_frame_equal(back[columns], first[columns])


def test_field_scoring_counts_grounded_and_ungrounded_values(stub):
    out = extract(stub, tickets(QUOTES, PARAPHRASE, INVENTS))
    out["true_order"] = ["BRW-10421", "BRW-20001", None]
    out["true_amount"] = [29.9, None, None]
    with pytest.warns(EvaluationWarning, match="fewer than 10 rows"):
        table = gwlab.evaluate(out, truth={"order": "true_order", "amount": "true_amount"}, kind="fields").metrics
    assert table.loc["order", ["grounded", "ungrounded", "invented_ungrounded", "right_ungrounded"]].tolist() \
        == [2, 1, 1, 0]
    assert table.loc["amount", ["grounded", "ungrounded", "invented", "invented_ungrounded"]].tolist() == [1, 1, 1, 1]


def test_the_view_highlights_spans_marks_ungrounded_values_and_escapes_every_text(stub):
    out = extract(stub, tickets(QUOTES, INVENTS, SCRIPT))
    page = gwlab.show_grounding(out)._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<b>more</b>" not in page
    assert ">BRW 10421</mark>" in page and ">29.90</mark>" in page
    assert "✗ not found" in page and "BRW-12345" in page
    one = gwlab.show_grounding(out, 2, fields=["order"])._repr_html_()
    assert "BRW-12345" in one and "BRW 10421" not in one and "<script" not in one


def test_the_view_shows_a_dropped_value_from_the_raw_answer(stub):
    out = extract(stub, tickets(INVENTS), grounding="drop")
    page = gwlab.show_grounding(out)._repr_html_()
    assert "BRW-12345" in page and "(dropped)" in page


def test_the_view_names_what_it_lacks(stub):
    out = extract(stub, tickets(QUOTES), grounding="off")
    with pytest.raises(InvalidRequest) as caught:
        gwlab.show_grounding(out, source="text")
    assert caught.value.field == "fields"
    with pytest.raises(InvalidRequest) as caught:
        gwlab.show_grounding(out.drop(columns="text"))
    assert caught.value.field == "source"


def test_a_single_schema_call_grounds_its_answer_in_the_users_text(stub):
    reply = stub.chat.create(f"Message: {INVENTS}", model="m", schema=SCHEMA)
    assert reply.grounding["order"].status == "not_found" and reply.parsed["order"] == "BRW-12345"
    assert "refund" not in reply.grounding  # a boolean is exempt
    reply = stub.chat.create(f"Message: {QUOTES}", model="m", schema=SCHEMA, grounding="drop")
    start, end = reply.grounding["order"].span
    assert f"Message: {QUOTES}"[start:end] == "BRW 10421" and reply.parsed["order"] == "BRW-10421"
    reply = stub.chat.create([{"role": "user", "content": f"Message: {INVENTS}"}], model="m", schema=SCHEMA,
                             grounding="drop")
    assert reply.parsed["order"] is None and reply.parsed["refund"] is False
    assert stub.chat.create(f"Message: {INVENTS}", model="m", schema=SCHEMA, grounding="off").grounding is None


def test_a_single_call_grounds_in_the_source_given(stub):
    reply = stub.chat.create(f"Message: {QUOTES}", model="m", schema=SCHEMA, source=INVENTS)
    assert reply.grounding["order"].status == "not_found"
    with pytest.raises(InvalidRequest) as caught:
        stub.chat.create(f"Message: {QUOTES}", model="m", schema=SCHEMA, grounding="sometimes")
    assert caught.value.field == "grounding"


def test_a_pydantic_answer_drops_a_value_not_found_and_a_flagged_field_is_exempt(stub):
    from pydantic import BaseModel, Field

    class Ticket(BaseModel):
        order: str | None
        ask: str = Field(json_schema_extra={"x-grounding": False})

    reply = stub.chat.create(f"Message: {LATE}", model="m", schema=Ticket, grounding="drop")
    assert isinstance(reply.parsed, Ticket) and reply.parsed.order is None and reply.parsed.ask == "parcel location"
    assert set(reply.grounding) == {"order"} and reply.grounding["order"].status == "not_found"
    assert "x-grounding" not in str(REQUESTS[-1]["body"]["response_format"])
