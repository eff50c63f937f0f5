"""The gateway the core tests talk to: the one `make test-core` serves (URL and key by environment), else
the session's embedded gateway (a run in the full venv)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gwlab.client.gateway import Gateway

URL_ENV, KEY_ENV = "GWLAB_CORE_BASE_URL", "GWLAB_CORE_API_KEY"


@pytest.fixture(scope="session")
def core_gw(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    """A client of a running gateway; the core venv cannot start one itself (its models are extras)."""
    url, key = os.environ.get(URL_ENV), os.environ.get(KEY_ENV)
    if bool(url) != bool(key):
        raise pytest.UsageError(f"set both {URL_ENV} and {KEY_ENV}, or neither")
    if not url:
        running = request.getfixturevalue("gateway")
        url, key = running.base_url, running.api_key
    with Gateway(url, key) as client:
        yield client
