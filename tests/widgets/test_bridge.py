"""Where a console's work runs: built without a gateway, it uses the one the user connected."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("anywidget")

import gwlab
from gwlab.widgets import StreamConsole
from tests.support.models import PROMPT, TEXT_MODEL


def test_a_console_built_without_a_gateway_calls_through_the_one_the_user_connected(gateway: Any) -> None:
    user_gw = gwlab.connect(gateway.base_url, gateway.api_key)
    try:
        console = StreamConsole(model=TEXT_MODEL, max_tokens=2, temperature=0)
        console.submit(PROMPT)
        assert console.wait(180)
        assert list(user_gw.usage["path"]) == ["/chat/completions"]  # in the user's own ledger
    finally:
        user_gw.close()
