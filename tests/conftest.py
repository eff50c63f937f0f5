"""Shared fixtures: the real local gateway, started as a subprocess on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

# Property tests run beside the models on a shared 2-core machine: a slow draw is the machine, not a bug
# (CI: "Input generation is slow" failed a wire test at load 20), so no deadline and no too_slow check;
# the examples database stays off so a clean clone's run is the same as any other.
# (The core install, tests/core, has no hypothesis.)
try:
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow],
                              database=None)
    settings.load_profile("suite")

# Folders whose tests share session servers (third-party gateways, JupyterLab + chromium): under xdist
# (`make test` runs `pytest -n 2`) each goes to one worker, so its servers start once.
_ONE_WORKER = ("byo", "browser")


def work_unit(nodeid: str) -> str:
    """What one xdist worker runs whole: a shared-server folder, else a module (its module fixtures, such
    as a gateway of its own, start once, and a test that adds up its module's others sees them all)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[1] in _ONE_WORKER else "/".join(parts)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with `work_unit` as the scope. (Its `loadgroup` marks do not work under
    pytest 9, which no longer reads the node id xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """The real gateway, shared by the whole session (models load once)."""
    running = start_gateway(tmp_path_factory.mktemp("gateway") / "gateway.sqlite")
    yield running
    stop_gateway(running)
