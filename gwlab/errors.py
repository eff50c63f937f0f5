"""Every exception gwlab raises.

GatewayError
├── InvalidRequest           refused here, before sending; names the field (also a ValueError)
│   └── InvalidEvent             a realtime client event refused (.code: the error event's code)
├── ConnectionFailed         no complete answer: refused, reset
│   ├── Timeout                  connect, read or overall deadline passed
│   └── StreamInterrupted        closed before its end marker; .partial keeps what arrived
│       (alias IncompleteStream)
├── StreamError              the gateway reported a failure inside a stream it had answered 200:
│   │                        .error (the error object), .event (its type), .partial
│   └── RealtimeError            a realtime `error` event (.error_event, .type, .related_event)
├── ProtocolError            a 2xx answer the protocol does not allow: unexpected Content-Type, bad JSON
├── AnswerInvalid            a structured answer that is not JSON of its schema after its re-asks: .raw
│                            (also a ValueError)
└── StatusError              the gateway answered >= 400: .status, .request_id, .body
    ├── BadRequest 400/413/415/422 · AuthenticationFailed 401 · PermissionDenied 403 · NotFound 404
    ├── RateLimited 429 (.retry_after, .code)
    └── ServerError 5xx

Not GatewayErrors, by design: `RunInterrupted`, a KeyboardInterrupt (Ctrl-C during a `df.gw` run, after
the answers in flight were saved), and the warnings a run or an evaluation may give: `InputLimitWarning`,
`StructuredFallbackWarning`, `EvaluationWarning`, `FilterWarning`, `RepeatsWarning`,
`RunRecordWarning`. All are here, exported from `gwlab`.

The module is a leaf: any layer may import it, it imports nothing of ours (a realtime error event is
described by the fields it reads, `ErrorEventFields`, which gwlab/wire/realtime/events.py's
`ErrorEvent` has).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = [
    "AnswerInvalid",
    "AuthenticationFailed",
    "BadRequest",
    "BatchRowError",
    "ConnectionFailed",
    "GatewayError",
    "IncompleteStream",
    "InvalidEvent",
    "InvalidRequest",
    "NotFound",
    "PermissionDenied",
    "ProtocolError",
    "RateLimited",
    "RealtimeError",
    "ServerError",
    "StatusError",
    "StreamError",
    "StreamInterrupted",
    "Timeout",
]
__all__ += ["EvaluationWarning", "FilterWarning", "InputLimitWarning", "RepeatsWarning", "RunInterrupted",
            "RunRecordWarning",  # not GatewayErrors
            "StructuredFallbackWarning"]


class GatewayError(Exception):
    """Base of everything gwlab raises on purpose."""


class InvalidRequest(GatewayError, ValueError):
    """A request refused before it left: `field` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class InvalidEvent(InvalidRequest):
    """A realtime client event refused: `field` names the parameter, `code` is the error event's code
    (`invalid_value` unless said otherwise; gwlab.wire.realtime.session names the codes)."""

    def __init__(self, field: str, message: str, code: str = "invalid_value", event_id: str | None = None) -> None:
        super().__init__(field, message)
        self.code, self.event_id, self.detail = code, event_id, message


class ConnectionFailed(GatewayError):
    """No complete answer arrived: the connection was refused, reset or cut."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None) -> None:
        self.method, self.path = method, path
        where = f" ({method} {path})" if method else ""
        super().__init__(f"{message}{where}")


class Timeout(ConnectionFailed):
    """A connect, read or overall deadline passed."""


class StreamInterrupted(ConnectionFailed):
    """A stream closed before its documented end marker; `partial` holds what arrived."""

    def __init__(self, message: str, *, partial: Any = None, method: str | None = None,
                 path: str | None = None, request_id: str | None = None) -> None:
        self.partial = partial
        self.request_id = request_id
        super().__init__(message, method=method, path=path)


IncompleteStream = StreamInterrupted


class StreamError(GatewayError):
    """An error event inside a stream (chat `error` chunk, responses `error`/`response.failed`,
    messages `error`): the HTTP status was already 200, so this is not a StatusError."""

    def __init__(self, message: str, *, error: Any = None, event: str | None = None, partial: Any = None,
                 method: str | None = None, path: str | None = None, request_id: str | None = None) -> None:
        self.error = error if error is not None else {}
        self.event = event
        self.partial = partial
        self.method, self.path = method, path
        self.request_id = request_id
        self.code = self.error.get("code") if isinstance(self.error, Mapping) else None
        where = f"{method} {path} " if method else ""
        rid = f" [request {request_id}]" if request_id else ""
        super().__init__(f"{where}stream {event or 'error'}: {message}{rid}")


class ErrorEventFields(Protocol):
    """What `RealtimeError` reads of a realtime `error` event (gwlab.wire.realtime.events.ErrorEvent)."""

    # read-only, as the event's frozen fields are
    @property
    def type(self) -> str: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def code(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def related_event_id(self) -> str | None: ...
    @property
    def related_event(self) -> Mapping[str, Any] | None: ...
    @property
    def raw(self) -> Mapping[str, Any]: ...


class RealtimeError(StreamError):
    """An `error` event from a realtime server (already saved to the ledger); `.error_event` has it all."""

    def __init__(self, event: ErrorEventFields, *, method: str | None = None, path: str | None = None) -> None:
        self.error_event = event
        self.type, self.related_event = event.error_type, event.related_event
        related = event.related_event
        where = f" (for {related.get('type')} {event.related_event_id})" if related else ""
        error = event.raw.get("error") if isinstance(event.raw.get("error"), Mapping) else {}
        super().__init__(f"{event.error_type}/{event.code}: {event.message}{where}", error=error,
                         event=event.type, method=method, path=path)


class ProtocolError(GatewayError):
    """A success status with a body the protocol does not allow (a proxy's HTML page, broken JSON)."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None,
                 request_id: str | None = None, content_type: str | None = None) -> None:
        self.method, self.path, self.request_id, self.content_type = method, path, request_id, content_type
        where = f"{method} {path} " if method else ""
        rid = f" [request {request_id}]" if request_id else ""
        super().__init__(f"{where}{message}{rid}")


class BatchRowError(GatewayError):
    """A row the batch job answered with an error, or did not finish (its row's `__error`)."""


class AnswerInvalid(GatewayError, ValueError):
    """A structured answer that is not JSON of its schema (still, after its re-asks); `raw` is the text as
    the model wrote it. Also a ValueError, as it was before it joined this tree."""

    def __init__(self, message: str, raw: str | None) -> None:
        super().__init__(message)
        self.raw = raw
        self.record: dict[str, Any] = {}  # what a frame keeps of the row (its raw text), set by the reader
        self.reply: Any = None  # the last reply, and every reply paid for, set by the re-ask driver
        self.replies: list[Any] = []
        self.asked = 0  # how many times it was asked again


class StatusError(GatewayError):
    """The gateway answered with a status >= 400."""

    def __init__(self, message: str, *, status: int, body: Any = None, request_id: str | None = None,
                 method: str | None = None, path: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.request_id = request_id
        self.method, self.path = method, path
        self.headers = dict(headers or {})
        self.error = _error_object(body)
        self.code = self.error.get("code") if isinstance(self.error, Mapping) else None
        self.field = field_of(body)
        self.param = self.field  # OpenAI's name for the same thing
        where = f"{method} {path} " if method else ""
        rid = f" [request {request_id}]" if request_id else ""
        super().__init__(f"{where}→ {status}: {message}{rid}")


class BadRequest(StatusError):
    """400 (and 413/415/422): correct the request before sending it again."""


class AuthenticationFailed(StatusError):
    """401: missing, invalid, disabled or deleted key, or a malformed auth header."""


class PermissionDenied(StatusError):
    """403: the key may not use this model or resource."""


class NotFound(StatusError):
    """404: unknown path, model, task or resource."""


class RateLimited(StatusError):
    """429: wait as directed (`retry_after` seconds) before a limited number of retries."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class ServerError(StatusError):
    """5xx: a temporary platform or upstream failure."""


def field_of(body: Any) -> str | None:
    """The request field an error body names, as a dotted path: OpenAI's `error.param`, System One's
    `error.field` (laya-serve), or FastAPI's first `detail[].loc` (without its leading `body`)."""
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body.get("detail"))
    if isinstance(error, list) and error and isinstance(error[0], Mapping):
        loc = error[0].get("loc")
        parts = [str(p) for p in loc if p != "body"] if isinstance(loc, list | tuple) else []
        return ".".join(parts) or None
    if isinstance(error, Mapping):
        for key in ("field", "param", "loc"):
            value = error.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list | tuple) and value:
                return ".".join(str(p) for p in value)
    return None


def _error_object(body: Any) -> Any:
    """The error object of any family's body: OpenAI/Anthropic `error`, TypeSafe `detail`."""
    if isinstance(body, Mapping):
        for key in ("error", "detail"):
            if key in body:
                return body[key] if isinstance(body[key], Mapping) else {"message": body[key]}
        return dict(body)
    return {"message": body} if body else {}


# --- not GatewayErrors: an interrupt, and the warnings a user may see ----------------------------------


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a `df.gw` run, after the requests in flight were answered and checkpointed (for a
    task batch: the submissions in flight, whose task ids are checkpointed).

    Still a KeyboardInterrupt, so a notebook cell or a script stops as the user asked; its message says
    how many answers are saved, in which file, and that running the same call again resumes (a bare
    `KeyboardInterrupt:` left users guessing whether the paid answers were lost). `.summary` is the run's.
    """

    def __init__(self, summary: Any) -> None:  # a RunSummary, or a task batch's TaskSummary
        self.summary = summary
        super().__init__(summary.interrupted_text())


class RepeatsWarning(UserWarning):
    """`repeats=k` on requests that ask for a deterministic answer: k requests paid for one answer."""


class InputLimitWarning(UserWarning):
    """Rows that look longer than the model's documented input limit, found before anything is sent."""


class StructuredFallbackWarning(UserWarning):
    """A gateway refused the native structured-output form: extract asks in the prompt instead."""


class EvaluationWarning(UserWarning):
    """An evaluation or recalibration ran, but its numbers need a caveat the user must see."""


class FilterWarning(UserWarning):
    """A filter ran, but what it kept needs a second look (no row passed)."""


class RunRecordWarning(RuntimeWarning):
    """A paid run's record could not be written to its store; it is kept for this process only."""
