"""Fixtures the local gateway's official-SDK tests share: each local text model in turn, an openai client."""

from __future__ import annotations

import openai
import pytest

from tests.support.models import TEXT_MODELS


@pytest.fixture(scope="module", params=TEXT_MODELS)
def model(request: pytest.FixtureRequest) -> str:
    """Each local text model: the claims about answers hold for Gemma 3 270M (base) and SmolLM2 (instruct)."""
    return request.param


@pytest.fixture(scope="module")
def client(gateway) -> openai.OpenAI:
    """The official openai SDK on the session's embedded gateway, without its own retries."""
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0)
