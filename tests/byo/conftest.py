"""Third-party gateways for tests/byo, each started once per session (servers.py), plus fresh ones to kill."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gwlab.client import dialect
from tests.support import servers
from tests.support.gateways import RunningGateway
from tests.support.models import DECIDE_MODEL
from tests.support.servers import RunningServer


@pytest.fixture(autouse=True)
def fresh_detection() -> Iterator[None]:
    """Each test starts from what gwlab can learn by itself (detection is remembered per base URL)."""
    dialect.forget()
    yield
    dialect.forget()


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """The packaged Gemma GGUF, found as gwlab's own engine finds it (assembled once from its chunk packages)."""
    from gwlab.local.engines._gguf import gemma_gguf_path

    return gemma_gguf_path()


@pytest.fixture(scope="session")
def byo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("byo")


def _serve(server: RunningServer) -> Iterator[RunningServer]:
    try:
        yield server
    finally:
        servers.stop(server)


@pytest.fixture(scope="session")
def llama_server(gemma_gguf: Path, byo_dir: Path) -> Iterator[RunningServer]:
    """llama-cpp-python's OpenAI-compatible server on Gemma 3 270M, shared by the session."""
    yield from _serve(servers.start_llama_server(gemma_gguf, byo_dir))


@pytest.fixture(scope="session")
def laya_server(byo_dir: Path) -> Iterator[RunningServer]:
    """laya-serve 0.2.1 (fake backend), shared by the session."""
    yield from _serve(servers.start_laya_serve(byo_dir))


@pytest.fixture(scope="session")
def litellm_proxy(llama_server: RunningServer, gateway: RunningGateway, laya_server: RunningServer,
                  byo_dir: Path) -> Iterator[RunningServer]:
    """LiteLLM's proxy: "gemma" -> the llama server, "decide" -> gwlab's embedded gateway (OpenAI's decisions
    shape), "jev" -> laya-serve (System One). Shared by the session (~20 s to start)."""
    yield from _serve(servers.start_litellm_proxy(llama_server, gateway.base_url, gateway.api_key,
                                                    DECIDE_MODEL, laya_server, byo_dir))


@pytest.fixture
def llama_server_to_kill(gemma_gguf: Path, tmp_path: Path) -> Iterator[RunningServer]:
    """A llama server of the test's own (~3 s to start), for a test that kills it."""
    yield from _serve(servers.start_llama_server(gemma_gguf, tmp_path))


@pytest.fixture
def laya_server_to_kill(tmp_path: Path) -> Iterator[RunningServer]:
    """A laya-serve of the test's own (~1 s to start), for a test that kills it."""
    yield from _serve(servers.start_laya_serve(tmp_path))


@pytest.fixture
def laya_server_rate_limited(tmp_path: Path) -> Iterator[RunningServer]:
    """A laya-serve allowing 2 requests a minute, fresh per test so its counter starts at zero."""
    yield from _serve(servers.start_laya_serve(tmp_path, rate_limit_per_minute=2))


@pytest.fixture
def litellm_proxy_to_kill(llama_server: RunningServer, gateway: RunningGateway, laya_server: RunningServer,
                          tmp_path: Path) -> Iterator[RunningServer]:
    """A LiteLLM proxy of the test's own (~20 s to start) in front of the session's servers, to kill."""
    yield from _serve(servers.start_litellm_proxy(llama_server, gateway.base_url, gateway.api_key,
                                                    DECIDE_MODEL, laya_server, tmp_path))
