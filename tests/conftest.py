"""Shared fixtures: the real local gateway, started as a subprocess on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

# Property tests run beside the models on a shared 2-core machine: a slow draw is the machine, not a bug
# (CI: "Input generation is slow" failed a wire test at load 20), so no deadline and no too_slow check;
# the examples database stays off so a clean clone's run is the same as any other.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
settings.load_profile("suite")

# Folders whose tests share session servers (third-party gateways, JupyterLab + chromium): under
# `pytest -n 2 --dist loadgroup` (make test) each runs on one worker, so its servers start once.
_ONE_WORKER = ("byo", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group each test for xdist: a shared-server folder as one group, any other module as its own group
    (its module fixtures, such as a gateway of its own, then start once, as in a serial run)."""
    for item in items:
        parts = item.nodeid.split("::", 1)[0].split("/")
        group = parts[1] if len(parts) > 2 and parts[1] in _ONE_WORKER else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """The real gateway, shared by the whole session (models load once)."""
    running = start_gateway(tmp_path_factory.mktemp("gateway") / "gateway.sqlite")
    yield running
    stop_gateway(running)
