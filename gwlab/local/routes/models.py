"""GET /v1/models: the models visible to the key, in one body all three SDKs parse."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from gwlab.local import catalog
from gwlab.local.auth import require_key
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord

router = APIRouter(tags=["models"])


@router.get("/models")
async def list_models(key: KeyRecord = Depends(require_key)) -> dict[str, Any]:
    return catalog.listing([m for m in catalog.models() if key.allows(m.id)])


@router.get("/models/{model_id:path}")
async def retrieve_model(model_id: str, key: KeyRecord = Depends(require_key)) -> dict[str, Any]:
    info = catalog.find(model_id)
    if info is None or not key.allows(model_id):
        raise APIError(404, f"The model '{model_id}' does not exist", code="model_not_found", param="model")
    entry: dict[str, Any] = catalog.listing([info])["data"][0]  # the one model's listing entry
    return entry
