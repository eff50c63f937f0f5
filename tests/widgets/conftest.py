"""Widget fixtures: a sync gateway on the real local gateway (its loop thread runs the consoles' tasks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gwlab import Gateway


@pytest.fixture(scope="module")
def gw(gateway: Any) -> Iterator[Gateway]:
    client = Gateway(gateway.base_url, gateway.api_key)
    yield client
    client.close()
