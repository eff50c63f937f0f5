"""Provider batch APIs as data: OpenAI files + batches and Anthropic message batches (NOTES.md).

Both take many requests at once, run them within a window (24 h) at half the price, and return the
results out of input order, keyed by the caller's `custom_id`. A `BatchAPI` row holds what differs
between the two (paths, limits, status names, terminal states); the functions here build request
lines and read result lines and batch objects. Pure: no I/O; the client and the local gateway both
read these shapes, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire.families import FAMILIES

__all__ = ["ANTHROPIC_BATCHES", "OPENAI_BATCHES", "BatchAPI", "BatchJob", "BatchResult", "Collation",
           "anthropic_request", "build_anthropic_requests", "build_openai_jsonl", "check_custom_ids",
           "collate", "iter_jsonl", "openai_line", "parse_anthropic_result", "parse_job",
           "parse_openai_result", "split_by_limits", "timing"]

MB = 1024 * 1024
COMPLETION_WINDOW = "24h"  # the only window either provider sells
WINDOW_SECONDS = 24 * 3600
MAX_METADATA_KEYS = 16
FILE_PURPOSE = "batch"
OUTPUT_PURPOSE = "batch_output"
LEDGER_FAMILY = "batch"  # the client ledger's family of a batch job's answered rows: priced at the batch rate

# OpenAI batch statuses, in their order of life; and the endpoints a batch line may call
OPENAI_STATUSES = ("validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling",
                   "cancelled")
OPENAI_TERMINAL = ("completed", "failed", "expired", "cancelled")
OPENAI_ENDPOINTS = (*(FAMILIES[name].route for name in ("chat", "responses", "embeddings")), "/v1/completions")
OPENAI_LINE_METHOD = "POST"
# Anthropic: the batch's processing_status, and each result's type
ANTHROPIC_STATUSES = ("in_progress", "canceling", "ended")
ANTHROPIC_TERMINAL = ("ended",)
RESULT_TYPES = ("succeeded", "errored", "canceled", "expired")
ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_CUSTOM_ID_MAX = 512  # not documented as a limit; a longer id is refused here rather than sent


@dataclass(frozen=True, slots=True)
class BatchAPI:
    """One provider's batch API: where it lives, its limits and what its statuses mean."""

    name: str  # "openai" | "anthropic": ledger label and error text
    create_path: str
    item_path: str  # with {batch_id}
    cancel_path: str
    list_path: str
    max_requests: int
    max_bytes: int
    statuses: tuple[str, ...]
    terminal: tuple[str, ...]
    status_field: str
    results_path: str | None = None  # Anthropic: results as JSONL; OpenAI reads output/error files
    cursor: str = "after"  # the listing's page parameter: the last id of the page before

    def path(self, template: str, batch_id: str) -> str:
        return template.replace("{batch_id}", batch_id)


OPENAI_BATCHES = BatchAPI(
    "openai", "/batches", "/batches/{batch_id}", "/batches/{batch_id}/cancel", "/batches",
    max_requests=50_000, max_bytes=200 * MB, statuses=OPENAI_STATUSES, terminal=OPENAI_TERMINAL,
    status_field="status")
ANTHROPIC_BATCHES = BatchAPI(
    "anthropic", "/messages/batches", "/messages/batches/{batch_id}", "/messages/batches/{batch_id}/cancel",
    "/messages/batches", max_requests=100_000, max_bytes=256 * MB, statuses=ANTHROPIC_STATUSES,
    terminal=ANTHROPIC_TERMINAL, status_field="processing_status",
    results_path="/messages/batches/{batch_id}/results", cursor="after_id")


# --- building ----------------------------------------------------------------------------------------
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _json_reader() -> tuple[Callable[[str | bytes], Any], type[ValueError]]:
    """Result files are read far faster with orjson (the `batch` extra); the standard library otherwise."""
    try:
        from orjson import JSONDecodeError, loads
    except ImportError:  # pragma: no cover - depends on the install
        return json.loads, ValueError
    return loads, JSONDecodeError


_loads, _DecodeError = _json_reader()


def check_custom_ids(ids: Sequence[str], api: BatchAPI = OPENAI_BATCHES) -> None:
    """Refuse ids that would make results ambiguous: duplicates (named), empty, or not the provider's form."""
    seen: set[str] = set()
    dupes: list[str] = []
    for cid in ids:
        if not isinstance(cid, str) or not cid:
            raise InvalidRequest("custom_id", f"every custom_id must be a non-empty string, got {cid!r}")
        if cid in seen:
            dupes.append(cid)
        seen.add(cid)
    if dupes:
        shown = ", ".join(repr(d) for d in dupes[:10])
        raise InvalidRequest("custom_id", f"{len(dupes)} duplicate custom_id(s): {shown}; each must be unique")
    if api.name == "anthropic":
        bad = next((c for c in ids if not ANTHROPIC_CUSTOM_ID.match(c)), None)
        if bad is not None:
            raise InvalidRequest("custom_id", f"{bad!r} is not 1-64 characters of [a-zA-Z0-9_-]")
    else:
        bad = next((c for c in ids if len(c) > OPENAI_CUSTOM_ID_MAX), None)
        if bad is not None:
            raise InvalidRequest("custom_id", f"a custom_id is longer than {OPENAI_CUSTOM_ID_MAX} characters")


def openai_line(custom_id: str, url: str, body: Mapping[str, Any]) -> bytes:
    """One JSONL line of an OpenAI batch input file, newline included."""
    return (_dumps({"custom_id": custom_id, "method": OPENAI_LINE_METHOD, "url": url, "body": body})
            + "\n").encode()


def build_openai_jsonl(items: Iterable[tuple[str, Mapping[str, Any]]], url: str) -> bytes:
    """The whole input file for (custom_id, body) pairs that all go to `url` (e.g. /v1/chat/completions)."""
    if url not in OPENAI_ENDPOINTS:
        raise InvalidRequest("endpoint", f"{url!r} is not a batch endpoint; one of {', '.join(OPENAI_ENDPOINTS)}")
    return b"".join(openai_line(cid, url, body) for cid, body in items)


def anthropic_request(custom_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "params": dict(params)}


def build_anthropic_requests(items: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The body of `POST /v1/messages/batches`."""
    return {"requests": [anthropic_request(cid, params) for cid, params in items]}


def split_by_limits(sizes: Sequence[int], api: BatchAPI, *, max_requests: int | None = None,
                    max_bytes: int | None = None) -> list[range]:
    """Consecutive index ranges whose count and byte total stay within the provider's limits.

    `sizes` are the encoded sizes of each request; one request larger than the byte limit is an error
    naming its index, never a batch that the provider would refuse after upload."""
    cap_n = min(max_requests or api.max_requests, api.max_requests)
    cap_b = min(max_bytes or api.max_bytes, api.max_bytes)
    chunks: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if size > cap_b:
            raise InvalidRequest(f"requests[{i}]", f"one request is {size} bytes, over the {cap_b}-byte batch limit")
        if i > start and (i - start >= cap_n or total + size > cap_b):
            chunks.append(range(start, i))
            start, total = i, 0
        total += size
    if len(sizes) > start:
        chunks.append(range(start, len(sizes)))
    return chunks


# --- reading -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BatchResult:
    """One result line: `kind` is succeeded | errored | canceled | expired (Anthropic's words, used for both)."""

    custom_id: str
    kind: str
    body: dict[str, Any] | None = None  # the answer (a chat completion, a message, ...) when succeeded
    error: dict[str, Any] | None = None  # {"code"/"type", "message"} when not
    status_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "succeeded"


def iter_jsonl(data: bytes | str) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(line number, object) per non-blank line; None for a line that is not a JSON object."""
    raw = data.encode() if isinstance(data, str) else data
    loads = _loads
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except (_DecodeError, ValueError, UnicodeDecodeError):
            yield n, None
            continue
        yield n, obj if type(obj) is dict else None


_OPENAI_ERROR_KIND = {"batch_expired": "expired", "batch_cancelled": "canceled"}


def parse_openai_result(obj: Mapping[str, Any]) -> BatchResult:
    """A line of an OpenAI batch output or error file."""
    cid = obj.get("custom_id")
    if type(cid) is not str:
        raise InvalidRequest("custom_id", "a result line has no custom_id")
    response, error = obj.get("response"), obj.get("error")
    if error:
        if not isinstance(error, Mapping):
            error = {"message": str(error)}
        return BatchResult(cid, _OPENAI_ERROR_KIND.get(str(error.get("code")), "errored"), error=dict(error))
    if type(response) is not dict:
        return BatchResult(cid, "errored", error={"code": "no_response", "message": "the line has no response"})
    status, body = response.get("status_code"), response.get("body")
    if type(status) is int and 200 <= status < 300 and type(body) is dict:
        return BatchResult(cid, "succeeded", body=body, status_code=status)
    inner = body.get("error") if isinstance(body, Mapping) else None
    err = dict(inner) if isinstance(inner, Mapping) else {"message": f"status {status}"}
    return BatchResult(cid, "errored", error=err, status_code=status if isinstance(status, int) else None)


def parse_anthropic_result(obj: Mapping[str, Any]) -> BatchResult:
    """A line of an Anthropic message batch's results."""
    cid = obj.get("custom_id")
    if not isinstance(cid, str):
        raise InvalidRequest("custom_id", "a result line has no custom_id")
    result = got if isinstance(got := obj.get("result"), Mapping) else {}
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), Mapping):
        return BatchResult(cid, "succeeded", body=dict(result["message"]), status_code=200)
    if kind in ("canceled", "expired"):
        return BatchResult(cid, kind, error={"type": kind, "message": f"the request was {kind}"})
    err = got if isinstance(got := result.get("error"), Mapping) else {}
    inner = got if isinstance(got := err.get("error"), Mapping) else err
    return BatchResult(cid, "errored", error=dict(inner) or {"message": f"result type {kind!r}"})


@dataclass(slots=True)
class Collation:
    """Results matched to the ids that were sent: never mis-assigned, everything odd counted."""

    results: dict[str, BatchResult] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # sent, no line came back
    unknown: list[str] = field(default_factory=list)  # a line for an id that was never sent
    duplicates: list[str] = field(default_factory=list)  # a second line for an id (the first is kept)
    unreadable: int = 0  # lines that were not JSON objects with a custom_id

    def counts(self) -> dict[str, int]:
        kinds = {k: 0 for k in RESULT_TYPES}
        for r in self.results.values():
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        return {**kinds, "missing": len(self.missing), "unknown": len(self.unknown),
                "duplicates": len(self.duplicates), "unreadable": self.unreadable}


def collate(files: Iterable[bytes | str], expected: Iterable[str], api: BatchAPI = OPENAI_BATCHES) -> Collation:
    """Match every line of the result files (output then error, for OpenAI) to the expected ids.

    A succeeded line wins over an error line for the same id (a gateway that reports a finished line
    of a cancelled batch as cancelled as well must not lose the answer); otherwise the first line wins."""
    order = list(expected)
    wanted = set(order)
    parse = parse_anthropic_result if api.name == "anthropic" else parse_openai_result
    out = Collation()
    for data in files:
        for _, obj in iter_jsonl(data):
            try:
                result = parse(obj) if obj is not None else None
            except InvalidRequest:
                result = None
            if result is None:
                out.unreadable += 1
            elif result.custom_id not in wanted:
                out.unknown.append(result.custom_id)
            elif result.custom_id in out.results:
                out.duplicates.append(result.custom_id)
                if result.ok and not out.results[result.custom_id].ok:
                    out.results[result.custom_id] = result
            else:
                out.results[result.custom_id] = result
    out.missing = [cid for cid in order if cid not in out.results]
    return out


@dataclass(frozen=True, slots=True)
class BatchJob:
    """A batch object of either API, read tolerantly (`raw` keeps every field)."""

    api: str
    id: str
    status: str
    total: int
    succeeded: int
    errored: int
    pending: int
    created_at: float | None
    terminal: bool
    output_file_id: str | None = None
    error_file_id: str | None = None
    results_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def parse_job(obj: Mapping[str, Any], api: BatchAPI) -> BatchJob:
    """A batch object as returned by create, retrieve, list or cancel."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("id"), str):
        raise InvalidRequest("id", "a batch object has no id")
    status = str(obj.get(api.status_field) or "")
    counts = got if isinstance(got := obj.get("request_counts"), Mapping) else {}
    if api.name == "anthropic":
        done = {k: int(counts.get(k) or 0) for k in ("succeeded", "errored", "canceled", "expired")}
        pending = int(counts.get("processing") or 0)
        total = pending + sum(done.values())
        succeeded, errored = done["succeeded"], done["errored"] + done["canceled"] + done["expired"]
        created = _time(obj.get("created_at"))
    else:
        total = int(counts.get("total") or 0)
        succeeded, errored = int(counts.get("completed") or 0), int(counts.get("failed") or 0)
        pending = max(total - succeeded - errored, 0)
        created = _time(obj.get("created_at"))
    meta = got if isinstance(got := obj.get("metadata"), Mapping) else {}
    return BatchJob(api.name, obj["id"], status, total, succeeded, errored, pending, created,
                    status in api.terminal, obj.get("output_file_id"), obj.get("error_file_id"),
                    obj.get("results_url"), dict(meta), dict(obj))


_ENDED_AT = ("completed_at", "failed_at", "expired_at", "cancelled_at", "ended_at")


def timing(job: BatchJob) -> tuple[float | None, float | None]:
    """(seconds from creation to the end, the window in seconds), read from the batch object's own times
    (either API); None where the gateway did not say. The pilot of a batch run extrapolates from them."""
    created = job.created_at
    ended = next((t for t in (_time(job.raw.get(f)) for f in _ENDED_AT) if t is not None), None)
    expires = _time(job.raw.get("expires_at"))
    if created is None:
        return None, None
    return (None if ended is None else max(ended - created, 0.0),
            None if expires is None else max(expires - created, 0.0))


def _time(value: Any) -> float | None:
    """Unix seconds (OpenAI) or an RFC 3339 string (Anthropic) as Unix seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def check_openai_line(obj: Any, endpoint: str) -> tuple[str, dict[str, Any]]:
    """(custom_id, body) of one input line, or InvalidRequest naming what is wrong with it."""
    if not isinstance(obj, Mapping):
        raise InvalidRequest("line", "the line is not a JSON object")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid:
        raise InvalidRequest("custom_id", "the line has no custom_id string")
    if obj.get("method") != OPENAI_LINE_METHOD:
        raise InvalidRequest("method", f"method must be {OPENAI_LINE_METHOD!r}, got {obj.get('method')!r}")
    if obj.get("url") != endpoint:
        raise InvalidRequest("url", f"url must be the batch's endpoint {endpoint!r}, got {obj.get('url')!r}")
    if not isinstance(obj.get("body"), Mapping):
        raise InvalidRequest("body", "the line's body must be a JSON object")
    return cid, dict(obj["body"])


def check_anthropic_request(obj: Any, index: int) -> tuple[str, dict[str, Any]]:
    """(custom_id, params) of `requests[index]` of a message batch, or InvalidRequest naming the field."""
    where = f"requests.{index}"
    if not isinstance(obj, Mapping):
        raise InvalidRequest(where, "each request must be an object with custom_id and params")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not ANTHROPIC_CUSTOM_ID.match(cid):
        raise InvalidRequest(f"{where}.custom_id", "custom_id must be 1-64 characters of [a-zA-Z0-9_-]")
    if not isinstance(obj.get("params"), Mapping):
        raise InvalidRequest(f"{where}.params", "params must be an object (a messages request)")
    return cid, dict(obj["params"])
