"""Fixtures the frames tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gwlab.client.gateway import Gateway


@pytest.fixture(scope="module")
def gw(gateway) -> Iterator[Gateway]:
    """A sync client of the session's embedded gateway, one per test module."""
    client = Gateway(gateway.base_url, gateway.api_key)
    yield client
    client.close()
