"""The only code that speaks HTTP: addressing, auth per family, timeouts, retries, errors, ledger.

Retry policy (spec, Errors; protocols.md §5), decided here once for every family and written once, in
`RetryPolicy` (pure: the frames runner asks the same object between its single-attempt sends, with
`request(..., retries=0)`); every status >= 400, realtime handshakes included, becomes an error in
`status_error`:

- Retried: GET, HEAD, OPTIONS, PUT and DELETE (idempotent by HTTP), and POSTs whose family marks
  them idempotent: chat, responses, messages and decisions. Their only side effect is billing (a
  stored response is a harmless duplicate), so a lost answer is worth a limited, paid resend, as
  the official SDKs do. Any other POST -- task creation above all, realtime sessions too -- is sent
  once: spec rule 2 wants "was it accepted?" checked first, which only its family can do.
- The one exception: a connection that never opened (connect refused or timed out, pool timeout)
  carried no byte of the request, so it is retried for every method.
- Statuses 408, 409, 429 and the 5xx of `limits.RETRYABLE_STATUSES`; `x-should-retry` overrides the
  status (true/false); a 429 whose code says the quota is exhausted is never retried.
- At most `max_retries` (2) more attempts. The wait is `retry-after-ms`, else `Retry-After` (seconds
  or an HTTP date); a wait beyond `retry_after_cap` (60 s) is not slept through: the error (for 429,
  RateLimited with `.retry_after`) is raised at once. Without a header: 0.5 s·2^n capped at 8 s,
  minus up to 25 % jitter. No retry may outlive the call's overall `deadline`.
- A 429 refused the request, so nothing was accepted: a caller that resends a non-idempotent request
  itself (task batches, pausing every submission of a run) may resend it, after the same wait
  (`RetryPolicy.refusal_delay`). The transport itself still sends such a POST once.
- A stream is retried only until its status line arrives; once events flow, a cut is reported
  (StreamInterrupted), never silently resent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlsplit

import httpx

from gwlab import errors
from gwlab.client import dialect as _dialect  # `dialect` is AsyncTransport's parameter and property
from gwlab.client import transport_choice
from gwlab.client.config import ClientConfig
from gwlab.client.ledger import CallRecord, Ledger
from gwlab.wire import endings, limits
from gwlab.wire.families import FAMILIES

if TYPE_CHECKING:
    from gwlab.client.streams import AsyncEventStream

__all__ = ["AsyncTransport", "Reply", "RetryPolicy", "normalize_base_url", "request_id_of", "retry_after_seconds",
           "status_error", "translate", "ws_url"]

T = TypeVar("T")
Parse = Callable[[Any, str | None], T]
Headers = Mapping[str, str] | None  # extra headers of one call (`extra_headers=`)


class CallOptions(TypedDict, total=False):
    """The less common settings of one `request`: all optional."""

    params: Mapping[str, Any] | None  # the query; None values are left out (spec rule 2)
    path_params: Mapping[str, Any] | None  # `{name}` parts of the path, URL-encoded
    content: bytes | None  # a raw body (instead of `json`)
    files: Any  # a multipart body, as httpx takes it
    data: Any
    headers: Mapping[str, str] | None  # extra headers
    idempotent: bool | None  # None: by the method and the family's row
    expect_json: bool  # False: any Content-Type is read (downloads)
    retries: int | None  # caps this call's resends (0: send once, for a caller that retries by itself)


@dataclass(frozen=True, slots=True)
class _Sending:
    """How one call is sent and resent: decided once in `request`, read by every attempt."""

    idempotent: bool
    policy: RetryPolicy
    options: CallOptions

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


# --- addressing ----------------------------------------------------------------------------------


def normalize_base_url(url: str) -> str:
    """`{api_host}` or `{api_host}/v1` (trailing slashes, a doubled /v1) -> `{api_host}/v1`."""
    if not isinstance(url, str) or not url.strip():
        raise errors.InvalidRequest("base_url", "required: the gateway address, e.g. http://127.0.0.1:8000/v1")
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise errors.InvalidRequest("base_url", f"must be an http(s) URL; got {url!r}")
    if parts.query or parts.fragment:
        raise errors.InvalidRequest("base_url", "must not carry a query or fragment")
    while url.endswith(limits.API_PREFIX + limits.API_PREFIX):  # spec: /v1/v1 fails
        url = url[: -len(limits.API_PREFIX)]
    _refuse_path_after_prefix(url)
    return url if url.endswith(limits.API_PREFIX) else url + limits.API_PREFIX


def _refuse_path_after_prefix(url: str) -> None:
    """A path after /v1 would be silently glued before every route (`.../v1/systemone/v1/models`)."""
    path = urlsplit(url).path
    head, sep, rest = (path + "/").partition(limits.API_PREFIX + "/")
    rest = rest.strip("/")
    if not sep or not rest:
        return
    base = url[: len(url) - len(path)] + head + limits.API_PREFIX
    if rest.strip("/") == _dialect.SYSTEM_ONE_PATH.strip("/"):
        todo = (f"use base_url={base!r} and dialect={{'decisions_path': '{_dialect.SYSTEM_ONE_PATH}'}} to send "
                f"decisions to {_dialect.SYSTEM_ONE_PATH} (gwlab also detects it: docs/guide/byo-gateway.md)")
    else:
        routes = ", ".join(row.path for row in FAMILIES.values() if row.frame_method)
        todo = f"use base_url={base!r}; gwlab adds each family's route ({routes})"
    raise errors.InvalidRequest("base_url", f"must end at {limits.API_PREFIX}, with no path after it "
                                            f"(got '{limits.API_PREFIX}/{rest}'): {todo}")


def ws_url(base_url: str) -> str:
    """`{ws_base_url}`: the same address with ws:// or wss://."""
    return "ws" + base_url[4:] if base_url.startswith("http") else base_url


def _path(path: str, path_params: Mapping[str, Any] | None) -> str:
    if not path.startswith("/") or path.startswith(limits.API_PREFIX + "/"):
        raise errors.InvalidRequest("path", f"must start with / and be relative to {{base_url}}, which "
                                            f"already ends in {limits.API_PREFIX}; got {path!r}")
    if path_params:  # spec, conventions rule 1: path parameters are URL-encoded
        path = path.format(**{k: quote(str(v), safe="") for k, v in path_params.items()})
    return path


# --- errors --------------------------------------------------------------------------------------


def translate(exc: httpx.HTTPError, method: str, path: str) -> errors.GatewayError:
    """The gwlab error for an httpx failure (the one place they are mapped)."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        kind = {httpx.ConnectTimeout: "connecting", httpx.ReadTimeout: "waiting for the answer",
                httpx.WriteTimeout: "sending", httpx.PoolTimeout: "waiting for a free connection"}
        phase = kind.get(type(exc), "in transit")
        return errors.Timeout(f"timed out {phase} ({detail})", method=method, path=path)
    if isinstance(exc, httpx.ConnectError):
        return errors.ConnectionFailed(f"could not connect: {detail}; is the gateway running there?",
                                       method=method, path=path)
    return errors.ConnectionFailed(f"connection failed: {type(exc).__name__}: {detail}",
                                   method=method, path=path)


_HINTS = {401: "check the API key (GWLAB_API_KEY) and that it is enabled",
          403: "the key may not use this model or resource",
          404: "no such model or resource: check the model ID (gw.models()) and the resource ID"}
GUIDE = "docs/guide/byo-gateway.md"


def _hint(status: int, body: Any, family: str, method: str, path: str) -> str | None:
    """What to do about an error status; a 404 says whether the route or the model/resource is missing."""
    if status == 404 and _dialect.route_missing(body):
        return (f"no such route on this gateway: it does not serve {method} {limits.API_PREFIX}{path}, so it "
                f"may not offer the {family} family there; see {GUIDE} (dialect= sets another route)")
    return _HINTS.get(status)


def retry_after_seconds(headers: httpx.Headers | Mapping[str, str]) -> float | None:
    """The wait a 429/503 asks for: `retry-after-ms`, else `Retry-After` as seconds or an HTTP date."""
    value = headers.get(limits.RETRY_AFTER_MS_HEADER)
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get(limits.RETRY_AFTER_HEADER)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


def request_id_of(headers: Mapping[str, str]) -> str | None:
    """The request id of an answer, from the first header `limits.REQUEST_ID_HEADERS` lists that it carries."""
    for name in limits.REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or media_type.endswith("+json")


# the most specific class per status; others: ServerError for 5xx, else StatusError
_STATUS_CLASSES: dict[int, type[errors.StatusError]] = {
    400: errors.BadRequest, 401: errors.AuthenticationFailed, 403: errors.PermissionDenied, 404: errors.NotFound,
    413: errors.BadRequest, 415: errors.BadRequest, 422: errors.BadRequest, 429: errors.RateLimited,
}


def status_error(status: int, headers: Mapping[str, str] | list[tuple[str, str]], content: bytes | str | None, *,
                 method: str, path: str,
                 family: str = "", reason: str | None = None, request_id: str | None = None,
                 scrub: Callable[[Any], Any] = lambda value: value) -> errors.StatusError:
    """The error of a status >= 400, for every caller (HTTP families, the realtime handshake, WebRTC's
    offer): the status's class, the gateway's own message (field named) and a hint, the request id from
    any header `limits.REQUEST_ID_HEADERS` lists (else the body's `request_id`). Pure: `scrub` takes
    the key out of the body before it reaches the exception."""
    headers = httpx.Headers(headers)
    body: Any = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if body and (_is_json(media_type) or (not media_type and body.lstrip().startswith("{"))):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    body = scrub(body or None)
    request_id = request_id or request_id_of(headers)
    if request_id is None and isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    cls = _STATUS_CLASSES.get(status, errors.ServerError if status >= 500 else errors.StatusError)
    message = _message(body) or reason or "HTTP error"
    hint = _hint(status, body, family, method, path)
    kwargs: dict[str, Any] = {"status": status, "body": body, "request_id": request_id, "method": method,
                              "path": path, "headers": headers}
    if cls is errors.RateLimited:
        kwargs["retry_after"] = retry_after_seconds(headers)
    return cls(f"{message} ({hint})" if hint else message, **kwargs)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The retry rule of the module docstring, as a pure function of what happened: every caller that
    retries (this transport, the frames runner between its attempts, task batches after a 429) asks it,
    so the rule exists once."""

    max_retries: int = limits.MAX_RETRIES_DEFAULT
    retry_after_cap: float = limits.RETRY_AFTER_CAP_SECONDS

    def delay(self, error: BaseException, attempt: int, *, idempotent: bool, sent: bool = True) -> float | None:
        """Seconds to wait before retry number `attempt + 1` after `error`, or None: raise it.

        `sent=False` says the connection never opened, so no byte left and any method may be resent."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, errors.StatusError):
            return self._status_delay(error, attempt) if idempotent else None
        if isinstance(error, errors.ConnectionFailed) and not isinstance(error, errors.StreamInterrupted):
            return self.backoff(attempt) if idempotent or not sent else None
        return None

    def refusal_delay(self, error: BaseException, attempt: int) -> float | None:
        """`delay` for a request that a 429 refused: since nothing was accepted, even a non-idempotent one
        (a task submission) may be resent; any other error gives None, so its caller settles it."""
        if not isinstance(error, errors.RateLimited):
            return None
        return self.delay(error, attempt, idempotent=True)

    def _status_delay(self, error: errors.StatusError, attempt: int) -> float | None:
        headers = httpx.Headers(error.headers)
        should = headers.get(limits.SHOULD_RETRY_HEADER, "").strip().lower()
        if should == "false" or (should != "true" and error.status not in limits.RETRYABLE_STATUSES):
            return None
        if error.status == 429 and _quota_exhausted(error):
            return None
        wait = getattr(error, "retry_after", None)  # RateLimited read it when the answer arrived
        wait = wait if wait is not None else retry_after_seconds(headers)
        if wait is not None and wait > self.retry_after_cap:
            return None
        return wait if wait is not None and wait > 0 else self.backoff(attempt)

    @staticmethod
    def backoff(attempt: int) -> float:
        """0.5 s·2^attempt capped at 8 s, minus up to 25 % jitter (read from limits at each call)."""
        base = min(limits.BACKOFF_BASE_SECONDS * 2**attempt, limits.BACKOFF_MAX_SECONDS)
        return base * (1.0 - limits.BACKOFF_JITTER * random.random())


# --- the transport -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """A raw answer, for callers that need more than a typed body (headers, binary content)."""

    status: int
    headers: httpx.Headers
    body: Any  # parsed by Content-Type: JSON value, text, or bytes
    request_id: str | None = None
    retries: int = 0


def _ending_of(family: str, result: Any) -> str:
    """How a whole answer ended: a typed result says it, a raw body is read by its family's rule, and
    any other successful call (a listing, a decision) is simply complete."""
    ending = getattr(result, "ending", None)
    if isinstance(ending, str):
        return ending
    row = FAMILIES.get(family)
    read = row.ending if row is not None and row.ending is not None else None
    body = result.body if isinstance(result, Reply) else result
    return (read(body) if read else None) or endings.COMPLETE


def _usage_of(result: Any) -> Any:
    if isinstance(result, Reply):
        result = result.body
    if isinstance(result, Mapping):
        return result.get("usage")
    return getattr(result, "usage", None)


class _Secret:
    """The key and the auth headers made from it, behind a repr that shows neither (vars() too)."""

    __slots__ = ("bearer", "by_family", "value")

    def __init__(self, value: str, messages_auth: str, anthropic_version: str) -> None:
        self.value = value
        self.bearer = {limits.AUTHORIZATION_HEADER: f"Bearer {value}"}
        messages = {limits.API_KEY_HEADER: value} if messages_auth == "x-api-key" else self.bearer
        self.by_family = {"messages": {limits.ANTHROPIC_VERSION_HEADER: anthropic_version, **messages}}

    def __repr__(self) -> str:
        return "<secret>"


class AsyncTransport:
    """One `httpx.AsyncClient` per gateway, with everything the spec asks of every call."""

    def __init__(self, base_url: str, api_key: str, *, config: ClientConfig | None = None,
                 ledger: Ledger | None = None) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise errors.InvalidRequest("api_key", "required: a key issued by this gateway (GWLAB_API_KEY)")
        config = config if config is not None else ClientConfig()
        self.base_url = normalize_base_url(base_url)
        self.dialects = _dialect.DialectBook(self.base_url, config.dialect)
        self.api_host = self.base_url[: -len(limits.API_PREFIX)]
        self.ws_base_url = ws_url(self.base_url)
        self.ledger = ledger if ledger is not None else Ledger()
        self.retry = RetryPolicy(config.max_retries, config.retry_after_cap)
        self.deadline = config.deadline
        self._key = _Secret(api_key, config.messages_auth, config.anthropic_version)
        self._urls: dict[str, httpx.URL] = {}
        self._local_identity: str | None = None  # "" once asked and not an embedded gateway
        # the fast path on loopback, httpx (with the environment's proxies) elsewhere: transport_choice
        self.http_transport = transport_choice.choose(self.base_url, config.http_transport)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            headers={"user-agent": "gwlab/0.1", "accept": "application/json", **(config.headers or {})},
            transport=transport_choice.transport_for(self.http_transport, config.http_transport),
            trust_env=self.http_transport.name == "httpx", follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"AsyncTransport(base_url={self.base_url!r})"

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    @property
    def retry_after_cap(self) -> float:
        return self.retry.retry_after_cap

    def api_key_for_workers(self) -> str:
        """The key itself, only to hand to worker processes that open their own connection to this gateway
        (`gwlab.frames.dask.GatewaySpec`, which keeps it out of reprs). Never log, print or store it."""
        return self._key.value

    def auth_headers(self, family: str) -> dict[str, str]:
        """Bearer for every family but messages: x-api-key (or Bearer) + anthropic-version."""
        return self._key.by_family.get(family, self._key.bearer)

    def url(self, path: str, path_params: Mapping[str, Any] | None = None) -> httpx.URL:
        """`{base_url}` + a path relative to it (path parameters URL-encoded)."""
        if path_params:
            return httpx.URL(self.base_url + _path(path, path_params))
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.base_url + _path(path, None))
        return url

    def is_idempotent(self, method: str, family: str, idempotent: bool | None) -> bool:
        if idempotent is not None:
            return idempotent
        row = FAMILIES.get(family)  # a task family is no row: its submissions are never resent blind
        return method in IDEMPOTENT_METHODS or (method == "POST" and row is not None and row.idempotent)

    # -- one call -----------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, family: str, json: Any = None, parse: Parse[T] | None = None,
                      **options: Unpack[CallOptions]) -> T | Reply:
        """Send, retry as the policy allows, map errors, record the call; return `parse(body, request_id)`
        (or a `Reply` when no parser is given). `options` are the call's less common settings
        (`CallOptions`: query, path parameters, raw bodies, headers, idempotency, Content-Type, resends)."""
        unknown = sorted(set(options) - set(CallOptions.__annotations__))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        policy = self._policy(options.get("retries"))  # may refuse: nothing sent
        out = _dialect.adapt_request(self.dialect, family, method, path, json)  # may refuse: nothing sent
        call = CallRecord(method, _path(path, options.get("path_params")), family, _model(json), streamed=False)
        sending = _Sending(self.is_idempotent(method, family, options.get("idempotent")), policy, options)
        with self._failure_recorded(call):
            async with asyncio.timeout(self.deadline):
                response, out = await self._exchange_in_dialect(call, out, path=path, json=json, sending=sending)
                body = _dialect.adapt_response(out, await self._read_body(response, call,
                                                                           options.get("expect_json", True)))
                self._learn_from_answer(call, path, body)
            result: Any = parse(body, call.request_id) if parse is not None else Reply(
                response.status_code, response.headers, body, call.request_id, call.retries)
        call.record(self.ledger, usage=_usage_of(result), ending=_ending_of(call.family, result))
        return result

    async def stream(self, method: str, path: str, *, family: str, json: Any, accumulator: Any,
                     parse: Parse[Any] | None = None, headers: Mapping[str, str] | None = None,
                     idempotent: bool | None = None,
                     allow_partial: bool = False) -> AsyncEventStream[Any, Any]:
        """Send a streaming request; return its event stream once the status line is in (a JSON answer
        to a stream request is accepted too: the stream is then already complete)."""
        from gwlab.client.streams import AsyncEventStream  # streams imports this module

        out = _dialect.adapt_request(self.dialect, family, method, path, json)  # may refuse: nothing sent
        call = CallRecord(method, _path(path, None), family, _model(json), streamed=True)
        loop = asyncio.get_running_loop()
        deadline_at = loop.time() + self.deadline if self.deadline is not None else None
        with self._failure_recorded(call):
            async with asyncio.timeout_at(deadline_at):
                sending = _Sending(self.is_idempotent(method, family, idempotent), self.retry,
                                   {"headers": {"accept": "text/event-stream", **(headers or {})}})
                response, _ = await self._exchange_in_dialect(call, out, path=path, json=json, sending=sending)
                media_type = _media_type(response)
                body = None
                if media_type != "text/event-stream":
                    body = await self._read_body(response, call, expect_json=True)
                    if parse is None:
                        raise errors.ProtocolError(f"expected text/event-stream, got {media_type}",
                                                   method=method, path=call.path, request_id=call.request_id,
                                                   content_type=media_type)
        if parse is not None and media_type != "text/event-stream":
            return AsyncEventStream.answered(response, call, accumulator, parse(body, call.request_id),
                                             ledger=self.ledger)
        return AsyncEventStream(response, call, accumulator, ledger=self.ledger, allow_partial=allow_partial,
                                deadline_at=deadline_at, deadline_s=self.deadline)

    async def local_identity(self) -> str | None:
        """The embedded gateway's stable identity (`limits.GATEWAY_ID_HEADER`, "local:..."), which survives a
        restart on another port; None for any other gateway. Asked once, on loopback only, with one GET
        /models without the key and outside the ledger; an answer is remembered."""
        if self._local_identity is None and transport_choice.is_loopback(httpx.URL(self.base_url).host):
            try:
                response = await self._client.get(self.url(FAMILIES["models"].path))
            except httpx.HTTPError:
                return None
            value = response.headers.get(limits.GATEWAY_ID_HEADER, "")
            self._local_identity = value if value.startswith("local:") else ""
        return self._local_identity or None

    async def check_answers(self, path: str = FAMILIES["models"].path) -> None:
        """ConnectionFailed (scrubbed) unless the address answers HTTP at all: one GET of `path`, without the
        key, no retry, not in the ledger (`connect()`'s check; any status line counts as an answer, so the
        body is never read: a server that cuts its bodies is still reached, and its cut streams are then
        reported as interrupted streams, not as "no answer")."""
        try:
            response = await self._client.send(self._client.build_request("GET", self.url(path)), stream=True)
        except httpx.HTTPError as exc:
            raise self._scrubbed(translate(exc, "GET", path)) from exc
        await response.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _policy(self, retries: int | None) -> RetryPolicy:
        if retries is None:
            return self.retry
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise errors.InvalidRequest("retries", f"a count of resends >= 0; got {retries!r}")
        return replace(self.retry, max_retries=retries)

    @contextlib.contextmanager
    def _failure_recorded(self, call: CallRecord) -> Iterator[None]:
        """A call that fails before its answer is in gets its ledger row, and the overall deadline's
        TimeoutError becomes gwlab's Timeout (requests and streams alike)."""
        try:
            yield
        except TimeoutError as exc:
            error = self._deadline_passed(call)
            call.record(self.ledger, error=error)
            raise error from exc
        except BaseException as exc:
            call.record(self.ledger, error=exc)
            raise

    def _deadline_passed(self, call: CallRecord) -> errors.Timeout:
        return errors.Timeout(f"the overall deadline of {self.deadline}s passed", method=call.method,
                              path=call.path)

    # -- the dialect: one hook for every caller (client families and the frames layer alike) ---------

    @property
    def dialect(self) -> _dialect.Dialect:
        """How this gateway differs from the spec, each setting with its provenance (client.dialect)."""
        return self.dialects.dialect

    async def _exchange_in_dialect(self, call: CallRecord, out: _dialect.Outgoing, *, path: str, json: Any = None,
                                   sending: _Sending) -> tuple[httpx.Response, _dialect.Outgoing]:
        """`_exchange` of `out` (the route and body the dialect says); an error that is evidence for another
        setting (client.dialect.fallback) is answered by one resend under it, remembered if it works."""
        tried: set[str] = set()
        first: errors.StatusError | None = None
        step: _dialect.Fallback | None = None
        while True:
            call.path = _path(out.path, sending.options.get("path_params"))
            try:
                response = await self._exchange(call, path=out.path, json=out.body, sending=sending)
            except errors.StatusError as exc:
                if first is not None and not (exc.status == 404 and _dialect.route_missing(exc.body)):
                    raise  # the resend reached a route: its error says more than the first one
                if first is not None:
                    raise first from exc
                step = _dialect.fallback(out, call.family, exc, tried)
                if step is None or not self.dialects.may_learn(step.name):
                    raise
                first = exc
                tried.add(step.name)
                out = _dialect.adapt_request(replace(out.dialect, **{step.name: step.value}), call.family,
                                            call.method, path, json)
                continue
            if step is not None:
                self.dialects.learn(step.name, step.value, f"{step.evidence} {response.status_code}")
            return response, out

    def _learn_from_answer(self, call: CallRecord, path: str, body: Any) -> None:
        if call.family == "models" and call.method == FAMILIES["models"].method and path == FAMILIES["models"].path:
            step = _dialect.from_models(body)
            if step is not None:
                self.dialects.learn(step.name, step.value, step.evidence)

    # -- the exchange with retries ------------------------------------------------------------------

    async def _exchange(self, call: CallRecord, *, path: str, json: Any = None, sending: _Sending) -> httpx.Response:
        """Status < 400 with the body unread, or the mapped error once retries are spent."""
        options, policy, idempotent = sending.options, sending.policy, sending.idempotent
        url = self.url(path, options.get("path_params"))
        send_headers = {**self.auth_headers(call.family), **(options.get("headers") or {})}
        content, files, data, params = (options.get(name) for name in ("content", "files", "data", "params"))
        if json is not None:
            content = _dumps(json)
            send_headers["content-type"] = "application/json"
        query = {k: v for k, v in params.items() if v is not None} if params else None  # rule 2: omit unset
        while True:
            request = self._client.build_request(call.method, url, content=content, files=files, data=data,
                                                 params=query, headers=send_headers)
            try:
                response = await self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                error = translate(exc, call.method, call.path)
                delay = policy.delay(error, call.retries, idempotent=idempotent, sent=not isinstance(exc, _NOT_SENT))
                if delay is None or not self._may_wait(call, delay):
                    raise self._scrubbed(error) from exc
                await asyncio.sleep(delay)
                call.retries += 1
                continue
            call.status = response.status_code
            call.request_id = request_id_of(response.headers)
            if response.status_code < 400:
                return response
            error = await self._status_error(response, call)
            delay = policy.delay(error, call.retries, idempotent=idempotent)
            if delay is None or not self._may_wait(call, delay):
                raise error
            await asyncio.sleep(delay)
            call.retries += 1

    def _may_wait(self, call: CallRecord, delay: float) -> bool:
        """The policy said wait `delay`: only if the call's overall deadline outlives it."""
        return self.deadline is None or (time.perf_counter() - call.started) + delay < self.deadline

    async def _status_error(self, response: httpx.Response, call: CallRecord) -> errors.StatusError:
        try:
            await response.aread()
        except httpx.HTTPError:
            pass  # the status says enough; a body cut short is no reason to hide it
        finally:
            await response.aclose()
        error = status_error(response.status_code, response.headers, response.content, method=call.method,
                             path=call.path, family=call.family, reason=response.reason_phrase,
                             request_id=call.request_id, scrub=self._scrub)
        call.request_id = error.request_id
        return error

    async def _read_body(self, response: httpx.Response, call: CallRecord, expect_json: bool) -> Any:
        """The body parsed by its Content-Type (spec: response rule 2)."""
        try:
            content = await response.aread()
        except httpx.HTTPError as exc:
            raise self._scrubbed(translate(exc, call.method, call.path)) from exc
        finally:
            await response.aclose()
        media_type = _media_type(response)
        if _is_json(media_type):
            try:
                return json.loads(content) if content else None
            except ValueError as exc:
                raise errors.ProtocolError(f"the body is not valid JSON: {exc}", method=call.method,
                                           path=call.path, request_id=call.request_id,
                                           content_type=media_type) from exc
        if expect_json:
            raise errors.ProtocolError(f"expected application/json, got {media_type or 'no Content-Type'}",
                                       method=call.method, path=call.path, request_id=call.request_id,
                                       content_type=media_type)
        if media_type.startswith("text/"):
            return response.text
        return content

    # -- keeping the key out of everything ----------------------------------------------------------

    def _scrub(self, value: Any) -> Any:
        """A gateway may echo the key in an error message: never let it reach an exception."""
        key = self._key.value
        if isinstance(value, str):
            return value.replace(key, "[redacted]") if key in value else value
        if isinstance(value, Mapping | list) and key in json.dumps(value, default=str):
            return json.loads(json.dumps(value, default=str).replace(key, "[redacted]"))
        return value

    def _scrubbed(self, error: errors.GatewayError) -> errors.GatewayError:
        if self._key.value in str(error):
            error.args = tuple(self._scrub(a) for a in error.args)
        return error


def _dumps(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _model(body: Any) -> str | None:
    model = body.get("model") if isinstance(body, Mapping) else None
    return model if isinstance(model, str) else None


def _message(body: Any) -> str | None:
    """The error text of any family's body (OpenAI/Anthropic `error.message`, FastAPI `detail`)."""
    if isinstance(body, str):
        return body.strip()[:500] or None
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body.get("detail", body))
    if isinstance(error, str):
        return error[:500]
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        where = errors.field_of(body)  # System One's `field`, OpenAI's `param`: keep the field named
        text = error["message"][:500]
        return f"{where}: {text}" if where and where not in text else text
    if isinstance(error, list) and error and isinstance(error[0], Mapping):  # FastAPI validation errors
        first = error[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
    return body.get("message") if isinstance(body.get("message"), str) else None


def _quota_exhausted(error: errors.StatusError) -> bool:
    if error.code in limits.QUOTA_EXHAUSTED_CODES:
        return True
    kind = error.error.get("type") if isinstance(error.error, Mapping) else None
    return kind in limits.QUOTA_EXHAUSTED_CODES
