"""Provider batch APIs: `gw.batches` (OpenAI files + batches) and `gw.message_batches` (Anthropic).

The shapes, limits and result reading are `gwlab.wire.jobs.batches`; this module does the I/O. A batch is
billed once accepted, so creation is never resent blind: a create whose answer was lost is looked up
in the key's listing (OpenAI: by a `gwlab_submission` token in the metadata; Anthropic, which has no
metadata: by size and creation time, only when exactly one batch matches) before anything is sent
again. Where a gateway has no batch endpoint, the dialect's `batches` setting (or a 404 route on the
first call) gives an error naming the gateway and what it lacks before anything is paid.
"""

from __future__ import annotations

import asyncio
import builtins
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from gwlab.client.dialect import adapt_request
from gwlab.client.loop import LoopThread
from gwlab.client.transport.core import AsyncTransport, Reply
from gwlab.errors import ConnectionFailed, GatewayError, InvalidRequest, NotFound, ServerError
from gwlab.wire.families import FAMILIES
from gwlab.wire.jobs import batches as wb
from gwlab.wire.jobs.batches import ANTHROPIC_BATCHES, OPENAI_BATCHES, BatchAPI, BatchJob, Collation
from gwlab.wire.limits import API_PREFIX

__all__ = [
    "SUBMISSION_KEY",
    "AsyncBatches",
    "AsyncMessageBatches",
    "BatchUnsupported",
    "Batches",
    "MessageBatches",
]

SUBMISSION_KEY = "gwlab_submission"  # metadata token that finds a batch whose create answer was lost
OPENAI_FAMILY, ANTHROPIC_FAMILY = "batches", "messages"  # ledger label; messages: the x-api-key headers
_LOOKUP_SKEW = 120.0


class BatchUnsupported(InvalidRequest):
    """The gateway serves no batch API of this kind: said before anything is uploaded or paid."""


def _supported(transport: AsyncTransport, api: BatchAPI) -> None:
    setting = transport.dialect.get("batches")
    if setting not in ("both", api.name):
        raise BatchUnsupported("dialect.batches", f"the gateway at {transport.base_url} has no "
                               f"{api.name} batch API (dialect batches={setting!r}): it lacks "
                               f"{api.create_path}; run these rows synchronously or use another gateway")


def _route_missing(transport: AsyncTransport, api: BatchAPI, exc: NotFound, path: str) -> BatchUnsupported:
    error = BatchUnsupported("dialect.batches", f"the gateway at {transport.base_url} answered 404 for "
                             f"{path}: it has no {api.name} batch API; nothing was submitted")
    error.__cause__ = exc
    return error


def _is_route_404(exc: NotFound) -> bool:
    """A 404 for the path itself, not for an id (`..._not_found` codes name a missing object)."""
    code = str(getattr(exc, "code", "") or "")
    return not code.endswith("not_found") and code != "not_found"


class _AsyncBatchClient:
    """What both providers' batch clients share: the calls by a batch's id, a page of the listing, the ledger."""

    api: ClassVar[BatchAPI]
    family: ClassVar[str]  # the ledger's label, and which auth headers the transport sends

    def __init__(self, transport: AsyncTransport, *, lookup_delay: float = 0.5) -> None:
        self._t, self.lookup_delay = transport, lookup_delay

    async def _call(self, method: str, path: str, **kw: Any) -> Reply:
        return await self._t.request(method, path, family=self.family, **kw)

    async def retrieve(self, batch_id: str) -> BatchJob:
        reply = await self._call("GET", self.api.item_path, path_params={"batch_id": _id(batch_id)})
        return wb.parse_job(reply.body, self.api)

    async def _page(self, limit: int, cursor: str | None) -> tuple[list[BatchJob], bool]:
        """One page of this key's batches, newest first, and whether more follow."""
        reply = await self._call("GET", self.api.list_path, params={"limit": limit, self.api.cursor: cursor})
        return [wb.parse_job(j, self.api) for j in reply.body.get("data", [])], bool(reply.body.get("has_more"))

    async def cancel(self, batch_id: str) -> BatchJob:
        """Ask the gateway to cancel; lines that finished stay in the output file."""
        reply = await self._call("POST", self.api.cancel_path, path_params={"batch_id": _id(batch_id)},
                                 idempotent=True)
        return wb.parse_job(reply.body, self.api)

    def record(self, collation: Collation, *, path: str, model: str | None) -> int:
        """The answered rows of a collected job as ledger rows at the batch rate (`record_answers`)."""
        return record_answers(self._t, collation, path=path, model=model)


class AsyncBatches(_AsyncBatchClient):
    """OpenAI-shaped batches: `await gw.batches.submit([(custom_id, body), ...], endpoint=...)`."""

    api = OPENAI_BATCHES
    family = OPENAI_FAMILY

    # --- files -------------------------------------------------------------------------------------
    async def upload(self, data: bytes, *, filename: str = "batch.jsonl") -> dict[str, Any]:
        """Upload a JSONL input file (purpose `batch`); returns the file object."""
        _supported(self._t, self.api)
        if len(data) > self.api.max_bytes:
            raise InvalidRequest("file", f"{len(data)} bytes; a batch file holds at most {self.api.max_bytes}")
        try:
            reply = await self._call("POST", "/files", files={"file": (filename, data, "application/jsonl")},
                                     data={"purpose": wb.FILE_PURPOSE}, idempotent=False)
        except NotFound as exc:
            raise _route_missing(self._t, self.api, exc, "/files") from exc
        return dict(reply.body)

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (input, output or error file)."""
        reply = await self._call("GET", "/files/{file_id}/content", path_params={"file_id": file_id},
                                 headers={"accept": "*/*"}, expect_json=False)
        body = reply.body
        return body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else \
            "".join(_dump(x) for x in (body if isinstance(body, list) else [body])).encode()

    # --- batches -----------------------------------------------------------------------------------
    async def create(self, input_file_id: str, *, endpoint: str, metadata: Mapping[str, str] | None = None) -> BatchJob:
        """Create a batch over an uploaded file (sent once: a batch is billed once accepted)."""
        _supported(self._t, self.api)
        body: dict[str, Any] = {"input_file_id": input_file_id, "endpoint": endpoint,
                                "completion_window": wb.COMPLETION_WINDOW}
        if metadata:
            body["metadata"] = dict(metadata)
        reply = await self._call("POST", self.api.create_path, json=body, idempotent=False)
        return wb.parse_job(reply.body, self.api)

    async def list(self, *, limit: int = 20, after: str | None = None) -> tuple[list[BatchJob], bool]:
        """One page of this key's batches, newest first, and whether more follow."""
        return await self._page(limit, after)

    async def submit(self, items: Sequence[tuple[str, Mapping[str, Any]]], *, endpoint: str,
                     metadata: Mapping[str, str] | None = None) -> BatchJob:
        """Check the ids, upload one JSONL file and create its batch; a lost create is looked up first."""
        wb.check_custom_ids([cid for cid, _ in items], self.api)
        if len(items) > self.api.max_requests:
            raise InvalidRequest("requests", f"{len(items)} requests; a batch takes at most {self.api.max_requests}")
        data = wb.build_openai_jsonl(self._in_dialect(items, endpoint), endpoint)
        file = await self.upload(data)
        token = dict(metadata or {}).get(SUBMISSION_KEY) or secrets.token_hex(8)
        meta = {**dict(metadata or {}), SUBMISSION_KEY: token}
        started = time.time()
        try:
            return await self.create(file["id"], endpoint=endpoint, metadata=meta)
        except (ConnectionFailed, ServerError) as lost:
            found = await self.find(token, since=started)
            if found is not None:
                return found
            lost.add_note("The batch was not found in the listing; submitted once more.")
            return await self.create(file["id"], endpoint=endpoint, metadata=meta)

    def _in_dialect(self, items: Sequence[tuple[str, Mapping[str, Any]]],
                    endpoint: str) -> builtins.list[tuple[str, Mapping[str, Any]]]:
        """Each body as a synchronous call would send it to this gateway (the chat cap under both names)."""
        family = next((row.name for row in FAMILIES.values() if API_PREFIX + row.path == endpoint), None)
        if family is None:
            return list(items)
        dialect = self._t.dialect
        return [(cid, adapt_request(dialect, family, "POST", FAMILIES[family].path, body).body) for cid, body in items]

    async def find(self, token: str, *, since: float | None = None) -> BatchJob | None:
        """The batch whose metadata carries this submission token, from the newest pages of the listing."""
        if self.lookup_delay:
            await asyncio.sleep(self.lookup_delay)
        after = None
        for _ in range(10):
            jobs, more = await self.list(limit=100, after=after)
            for job in jobs:
                if job.metadata.get(SUBMISSION_KEY) == token:
                    return job
            if not more or not jobs or (since and (jobs[-1].created_at or 0) < since - _LOOKUP_SKEW):
                return None
            after = jobs[-1].id
        return None

    async def results(self, job: BatchJob, expected: Iterable[str]) -> Collation:
        """Both result files of a terminal job, matched to the ids sent (output first, then errors)."""
        files = [await self.content(f) for f in (job.output_file_id, job.error_file_id) if f]
        return wb.collate(files, expected, self.api)


class AsyncMessageBatches(_AsyncBatchClient):
    """Anthropic message batches: `await gw.message_batches.submit([(custom_id, params), ...])`."""

    api = ANTHROPIC_BATCHES
    family = ANTHROPIC_FAMILY

    def __init__(self, transport: AsyncTransport, *, lookup_delay: float = 0.5) -> None:
        super().__init__(transport, lookup_delay=lookup_delay)
        self._claimed: set[str] = set()

    async def create(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> BatchJob:
        """Create a message batch (sent once: a batch is billed once accepted)."""
        _supported(self._t, self.api)
        wb.check_custom_ids([cid for cid, _ in items], self.api)
        if len(items) > self.api.max_requests:
            raise InvalidRequest("requests", f"{len(items)} requests; a batch takes at most {self.api.max_requests}")
        try:
            reply = await self._call("POST", self.api.create_path, json=wb.build_anthropic_requests(items),
                                     idempotent=False)
        except NotFound as exc:
            if _is_route_404(exc):
                raise _route_missing(self._t, self.api, exc, self.api.create_path) from exc
            raise
        return self._claim(wb.parse_job(reply.body, self.api))

    def _claim(self, job: BatchJob) -> BatchJob:
        self._claimed.add(job.id)
        return job

    async def list(self, *, limit: int = 20, after_id: str | None = None) -> tuple[list[BatchJob], bool]:
        """One page of this key's message batches, newest first, and whether more follow."""
        return await self._page(limit, after_id)

    async def results_bytes(self, batch_id: str) -> bytes:
        path = self.api.results_path or ""
        reply = await self._call("GET", path, path_params={"batch_id": _id(batch_id)}, headers={"accept": "*/*"},
                                 expect_json=False)
        body = reply.body
        return body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else _dump(body).encode()

    async def results(self, job: BatchJob, expected: Iterable[str]) -> Collation:
        """The results of an ended message batch, matched to the ids sent."""
        return wb.collate([await self.results_bytes(job.id)], expected, self.api)

    async def submit(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> BatchJob:
        """`create`; a lost answer is looked up (same size, created since, unclaimed, exactly one) first."""
        started = time.time()
        try:
            return await self.create(items)
        except (ConnectionFailed, ServerError) as lost:
            found = await self.find(len(items), since=started)
            if found is not None:
                return self._claim(found)
            lost.add_note("No matching message batch was found in the listing; submitted once more.")
            return await self.create(items)

    async def find(self, size: int, *, since: float) -> BatchJob | None:
        """The one unclaimed batch of `size` requests created since `since`; None if none. Two candidates
        raise: which one is ours cannot be told, and resubmitting could bill the rows twice."""
        if self.lookup_delay:
            await asyncio.sleep(self.lookup_delay)
        jobs, _ = await self.list(limit=100)
        hits = [j for j in jobs if j.id not in self._claimed and j.total == size
                and (j.created_at or 0) >= since - _LOOKUP_SKEW]
        if len(hits) > 1:
            raise GatewayError(f"a lost message batch submission matches {len(hits)} batches "
                               f"({', '.join(j.id for j in hits)}); not resubmitted: check them by hand")
        return hits[0] if hits else None


def record_answers(transport: AsyncTransport, collation: Collation, *, path: str, model: str | None) -> int:
    """One ledger row per answered request of a collected job, with the provider's usage of that row
    (family `batch`, so `gwlab.frames.run.usage.summarize` prices it at the batch rate); the count is returned."""
    from gwlab.client.ledger import current_run
    from gwlab.wire.endings import COMPLETE
    from gwlab.wire.families import read_usage

    now, run, rows = time.time(), current_run(), 0
    for result in collation.results.values():
        if not result.ok or result.body is None:
            continue
        tokens_in, tokens_out = read_usage(result.body.get("usage"))
        body_id = result.body.get("id")
        transport.ledger.record(time=now, method="POST", path=path, family=wb.LEDGER_FAMILY,
                                model=result.body.get("model") or model, status=result.status_code or 200,
                                request_id=body_id if isinstance(body_id, str) else None, latency_s=0.0,
                                input_tokens=tokens_in, output_tokens=tokens_out, complete=True, run=run,
                                ending=COMPLETE)
        rows += 1
    return rows


def _id(batch_id: str) -> str:
    if not isinstance(batch_id, str) or not batch_id.strip():
        raise InvalidRequest("batch_id", "required: the id of a batch")
    return batch_id


def _dump(obj: Any) -> str:
    import json

    return json.dumps(obj) + "\n"


A = TypeVar("A", AsyncBatches, AsyncMessageBatches)


class _BatchClient(Generic[A]):
    """The synchronous face of a batch client: what both providers' share."""

    api: ClassVar[BatchAPI]

    def __init__(self, twin: A, loop: LoopThread) -> None:
        self.twin: A = twin
        self._loop = loop

    def retrieve(self, batch_id: str) -> BatchJob:
        return self._loop.run(self.twin.retrieve(batch_id))

    def cancel(self, batch_id: str) -> BatchJob:
        return self._loop.run(self.twin.cancel(batch_id))

    def results(self, job: BatchJob, expected: Iterable[str]) -> Collation:
        return self._loop.run(self.twin.results(job, list(expected)))


class Batches(_BatchClient[AsyncBatches]):
    """The synchronous face of `AsyncBatches`."""

    api = OPENAI_BATCHES

    def upload(self, data: bytes, *, filename: str = "batch.jsonl") -> dict[str, Any]:
        return self._loop.run(self.twin.upload(data, filename=filename))

    def content(self, file_id: str) -> bytes:
        return self._loop.run(self.twin.content(file_id))

    def create(self, input_file_id: str, *, endpoint: str, metadata: Mapping[str, str] | None = None) -> BatchJob:
        return self._loop.run(self.twin.create(input_file_id, endpoint=endpoint, metadata=metadata))

    def list(self, *, limit: int = 20, after: str | None = None) -> tuple[list[BatchJob], bool]:
        return self._loop.run(self.twin.list(limit=limit, after=after))

    def submit(self, items: Sequence[tuple[str, Mapping[str, Any]]], *, endpoint: str,
               metadata: Mapping[str, str] | None = None) -> BatchJob:
        return self._loop.run(self.twin.submit(items, endpoint=endpoint, metadata=metadata))

    def find(self, token: str, *, since: float | None = None) -> BatchJob | None:
        return self._loop.run(self.twin.find(token, since=since))


class MessageBatches(_BatchClient[AsyncMessageBatches]):
    """The synchronous face of `AsyncMessageBatches`."""

    api = ANTHROPIC_BATCHES

    def create(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> BatchJob:
        return self._loop.run(self.twin.create(items))

    def list(self, *, limit: int = 20, after_id: str | None = None) -> tuple[list[BatchJob], bool]:
        return self._loop.run(self.twin.list(limit=limit, after_id=after_id))

    def results_bytes(self, batch_id: str) -> bytes:
        return self._loop.run(self.twin.results_bytes(batch_id))

    def submit(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> BatchJob:
        return self._loop.run(self.twin.submit(items))

    def find(self, size: int, *, since: float) -> BatchJob | None:
        return self._loop.run(self.twin.find(size, since=since))
