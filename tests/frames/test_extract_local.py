"""df.gw.extract on the real embedded gateway: each family's structured-output form (chat
response_format, responses text.format, messages forced tool) reaches the local model's JSON-schema
grammar, so its answer validates. One short row per family: grammar decoding is slow on 2 cores."""

from __future__ import annotations

import pandas as pd
import pytest

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)

SCHEMA = {"sentiment": ["positive", "negative"], "refund": bool}


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_each_familys_structured_form_reaches_the_local_grammar_and_validates(gw, protocol):
    frame = pd.DataFrame({"text": ["I love my new kettle, it works perfectly."]})
    out = frame.gw.extract("Sentiment and whether a refund is asked: {text}", SCHEMA, protocol=protocol,
                           max_tokens=24, gateway=gw, checkpoint=None, progress=False, max_reasks=0)
    row = out.iloc[0]
    assert row["__status"] == "sent", row["__error"]
    assert row["sentiment"] in ("positive", "negative") and row["refund"] in (True, False)
    assert out["sentiment"].dtype == "category" and out["refund"].dtype == "boolean"
