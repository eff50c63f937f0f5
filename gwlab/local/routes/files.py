"""Files: OpenAI's `/v1/files` for batch input and output (purpose `batch`, `batch_output`).

An upload is streamed to disk in chunks (the multipart parser spools past 1 MB, and the copy goes a
chunk at a time), bounded by `Settings.batch_file_max_bytes` (the providers' 200 MB by default);
downloads stream from disk. A file belongs to the key that created it: another key gets a 404.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse

from gwlab.local.auth import require_key
from gwlab.local.errors import APIError
from gwlab.local.jobs.task_worker import new_id, page
from gwlab.local.store import KeyRecord, Store
from gwlab.wire.jobs import batches as wb

router = APIRouter(tags=["files"])
Key = Annotated[KeyRecord, Depends(require_key)]
PURPOSES = (wb.FILE_PURPOSE,)  # what may be uploaded here; batch_output files are written by the worker
CHUNK = 1 << 20
MULTIPART_SLACK = 64 * 1024  # boundaries and part headers around the file, within the body cap


def files_root(app: FastAPI) -> Path:
    return Path(app.state.files_root)


def upload_cap(settings: Any) -> int:
    """The body cap of `POST /v1/files`: the file's cap plus the multipart framing around it."""
    return int(settings.batch_file_max_bytes) + MULTIPART_SLACK


def register(store: Store, key_id: int, path: Path, filename: str, purpose: str) -> str:
    """Record a file already on disk as this key's file object; its id is returned."""
    file_id = new_id("file-")
    body: dict[str, Any] = {"id": file_id, "object": "file", "bytes": path.stat().st_size,
                            "created_at": int(time.time()), "expires_at": None, "filename": filename,
                            "purpose": purpose, "status": "processed", "status_details": None}
    store.save_file(file_id, key_id, body, str(path))
    return file_id


def load(request: Request, key: KeyRecord, file_id: str) -> tuple[dict[str, Any], str]:
    found = request.app.state.store.load_file(file_id, key.id)
    if found is None:
        raise APIError(404, f"No file with id '{file_id}'", code="file_not_found", param="file_id")
    return _shown(found[0]), found[1]


def _shown(file: dict[str, Any]) -> dict[str, Any]:
    """A file object without unset fields (the official schema has no null `expires_at`)."""
    return {k: v for k, v in file.items() if v is not None}


async def _form(request: Request) -> Any:
    try:
        return await request.form(max_files=1, max_fields=8)
    except AssertionError:  # python-multipart missing
        raise APIError(415, "uploads need python-multipart (pip install 'gwlab[local]')",
                       param="Content-Type") from None
    except HTTPException as exc:
        raise APIError(400, f"The multipart body could not be parsed: {exc.detail}", param="body") from None


async def _copy(upload: UploadFile, dest: Path, cap: int) -> int:
    """Copy an upload to `dest` a chunk at a time; past `cap` bytes the partial file is removed (413)."""
    size = 0
    with dest.open("wb") as out:
        while chunk := await upload.read(CHUNK):
            size += len(chunk)
            if size > cap:
                break
            out.write(chunk)
    if size > cap:
        dest.unlink(missing_ok=True)
        raise APIError(413, f"The file exceeds this gateway's {cap}-byte limit for batch files", param="file")
    return size


@router.post("/files")
async def create_file(request: Request, key: Key) -> dict[str, Any]:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "multipart/form-data":
        raise APIError(415, "Upload files as multipart/form-data with 'file' and 'purpose'", param="Content-Type")
    if getattr(request.state, "body_too_large", False):
        raise APIError(413, f"The file exceeds this gateway's {request.app.state.settings.batch_file_max_bytes}"
                       "-byte limit for batch files", param="file")
    form = await _form(request)
    purpose, upload = form.get("purpose"), form.get("file")
    if not isinstance(purpose, str) or purpose not in PURPOSES:
        raise APIError(400, f"'purpose' must be one of {', '.join(PURPOSES)} here, got {purpose!r}", param="purpose")
    if not isinstance(upload, UploadFile):
        raise APIError(400, "Missing required file part 'file'", param="file")
    file_id = new_id("file-")
    dest = files_root(request.app) / f"{file_id}.upload"
    size = await _copy(upload, dest, request.app.state.settings.batch_file_max_bytes)
    body = {"id": file_id, "object": "file", "bytes": size, "created_at": int(time.time()), "expires_at": None,
            "filename": upload.filename or "upload.jsonl", "purpose": purpose, "status": "processed",
            "status_details": None}
    request.app.state.store.save_file(file_id, key.id, body, str(dest))
    return _shown(body)


@router.get("/files")
async def list_files(request: Request, key: Key, purpose: str | None = None, limit: int = 10000,
                     order: str = "desc", after: str | None = None) -> dict[str, Any]:
    if not 1 <= limit <= 10000:
        raise APIError(400, "'limit' must be from 1 to 10000", param="limit")
    if order not in ("asc", "desc"):
        raise APIError(400, "'order' must be asc or desc", param="order")
    files = [_shown(f) for f in request.app.state.store.list_files(key.id) if purpose in (None, f["purpose"])]
    return page(files, limit, order, after, "file")


@router.get("/files/{file_id}")
async def retrieve_file(file_id: str, request: Request, key: Key) -> dict[str, Any]:
    return load(request, key, file_id)[0]


@router.get("/files/{file_id}/content")
async def file_content(file_id: str, request: Request, key: Key) -> FileResponse:
    body, path = load(request, key, file_id)
    if not os.path.exists(path):
        raise APIError(404, f"The bytes of file '{file_id}' are gone", code="file_not_found", param="file_id")
    return FileResponse(path, media_type="application/jsonl", filename=body["filename"])


@router.delete("/files/{file_id}")
async def delete_file(file_id: str, request: Request, key: Key) -> dict[str, Any]:
    load(request, key, file_id)
    path = request.app.state.store.delete_file(file_id, key.id)
    if path:
        Path(path).unlink(missing_ok=True)
    return {"id": file_id, "object": "file", "deleted": True}
