"""`params=` of df.gw.chat/respond/messages never fights a named argument: a collision names the field."""

from __future__ import annotations

import pandas as pd
import pytest

from gwlab.errors import InvalidRequest
from gwlab.frames._client import Connection

FRAME = pd.DataFrame({"fruit": ["banana"]})


async def _never(family, body):
    raise AssertionError("a refused request must not be sent")


@pytest.mark.parametrize(("method", "params", "field"), [
    ("chat", {"max_tokens": 6}, "params.max_tokens"),
    ("chat", {"max_completion_tokens": 6}, "params.max_completion_tokens"),
    ("chat", {"model": "x"}, "params.model"),
    ("chat", {"messages": []}, "params.messages"),
    ("chat", {"system": "be brief"}, "params.system"),
    ("respond", {"max_output_tokens": 6}, "params.max_output_tokens"),
    ("respond", {"instructions": "x"}, "params.instructions"),
    ("respond", {"input": "x"}, "params.input"),
    ("messages", {"max_tokens": 6}, "params.max_tokens"),
    ("messages", {"system": "x"}, "params.system"),
])
def test_a_params_key_that_a_named_argument_sets_raises_invalid_request_naming_it(method, params, field):
    with pytest.raises(InvalidRequest) as refused:
        getattr(FRAME.gw, method)("Q: What colour is a {fruit}?\nA:", model="m", max_tokens=6, params=params,
                                  gateway=Connection(_never))
    assert refused.value.field == field
    assert "named argument" in str(refused.value)
