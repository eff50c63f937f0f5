"""'This gateway refuses the native structured-output form' is a dialect fact (issue 32 point 4): a single
`schema=` call that meets the refusal asks in the prompt, learns it once for the gateway (shown by
`repr(gw)`), and later calls (single or `df.gw.extract`) ask in the prompt at once. Against the loopback
stub of tests/support/extract.py, whose `/plain/v1` refuses every structured-output field with a 400."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import pandas as pd
import pytest

import gwlab
import gwlab.frames.accessor  # registers df.gw
from gwlab.client.dialect import forget
from gwlab.errors import BadRequest, StructuredFallbackWarning
from tests.support.extract import GOOD, KEY, REQUESTS, SCHEMA, stub_server


@pytest.fixture
def plain() -> Iterator[str]:
    """The base URL of a gateway without structured output, with nothing learnt about it yet."""
    with stub_server() as url:
        base = url.replace("/v1", "/plain/v1")
        forget(base)
        yield base
        forget(base)


def native_asks() -> int:
    return sum("response_format" in r["body"] for r in REQUESTS)


def test_a_single_call_learns_the_refusal_once_and_its_next_calls_ask_in_the_prompt(plain: str) -> None:
    REQUESTS.clear()
    with gwlab.Gateway(plain, KEY) as gw:
        with pytest.warns(StructuredFallbackWarning, match="response_format refused"):
            first = gw.chat("good", model="m", schema=SCHEMA)
        assert first.parsed == GOOD and len(REQUESTS) == 2 and native_asks() == 1  # refused, then in the prompt
        assert "structured_output='prompt' (detected: response_format refused" in repr(gw)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StructuredFallbackWarning)  # said once per gateway, not per call
            second = gw.chat("good", model="m", schema=SCHEMA)
    assert second.parsed == GOOD and len(REQUESTS) == 3 and native_asks() == 1
    assert "JSON Schema" in json.dumps(REQUESTS[-1]["body"]["messages"])


def test_the_fact_is_the_gateways_so_another_client_and_a_frame_run_use_it(plain: str) -> None:
    with gwlab.Gateway(plain, KEY) as gw, pytest.warns(StructuredFallbackWarning):
        gw.messages.create("good", model="m", max_tokens=64, schema=SCHEMA)
    REQUESTS.clear()
    with gwlab.Gateway(plain, KEY) as again, warnings.catch_warnings():
        warnings.simplefilter("error", StructuredFallbackWarning)
        assert "structured_output='prompt' (detected:" in repr(again)
        reply = again.responses.create("good", model="m", schema=SCHEMA)
        out = pd.DataFrame({"text": ["good one"]}).gw.extract("{text}", SCHEMA, gateway=again, checkpoint=None,
                                                              progress=False, max_tokens=64)
    assert reply.parsed == GOOD and out.loc[0, "order"] == 42
    assert len(REQUESTS) == 2 and not any("text" in r["body"] or "response_format" in r["body"] for r in REQUESTS)
    assert "asked in the prompt (tools refused" in out.run.structured


def test_a_native_form_fixed_by_the_user_is_never_given_up(plain: str) -> None:
    REQUESTS.clear()
    with gwlab.Gateway(plain, KEY, dialect={"structured_output": "native"}) as gw:
        with pytest.raises(BadRequest, match="response_format"):
            gw.chat("good", model="m", schema=SCHEMA)
        assert "structured_output" not in repr(gw) or "(explicit)" in repr(gw)
    assert len(REQUESTS) == 1
    with gwlab.Gateway(plain, KEY) as fresh:
        assert "structured_output" not in repr(fresh)  # nothing was learnt from the refusal
