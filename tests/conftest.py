"""Shared fixtures: the real local gateway, started as a subprocess on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.gateways import RunningGateway, start_gateway, stop_gateway


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """The real gateway, shared by the whole session (models load once)."""
    running = start_gateway(tmp_path_factory.mktemp("gateway") / "gateway.sqlite")
    yield running
    stop_gateway(running)
