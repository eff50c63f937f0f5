"""The only code that speaks HTTP: addressing, auth per family, timeouts, retries, errors, ledger.

The retry rule is `RetryPolicy` (retry.py, with the rule itself in its docstring), asked here between
attempts; every status >= 400, realtime handshakes included, becomes an error in `status_error`
(status.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, overload
from urllib.parse import quote, urlsplit

import httpx

from gwlab import errors
from gwlab.client import dialect as _dialect  # `dialect` is AsyncTransport's parameter and property
from gwlab.client.config import ClientConfig
from gwlab.client.ledger import CallRecord, Ledger
from gwlab.client.transport import choice as transport_choice
from gwlab.client.transport.http11 import FastTransport
from gwlab.client.transport.retry import RetryPolicy
from gwlab.client.transport.status import is_json, media_type_of, request_id_of, status_error, translate
from gwlab.wire import endings, limits
from gwlab.wire.families import FAMILIES

if TYPE_CHECKING:
    from gwlab.client.streams import AsyncEventStream

__all__ = ["AsyncTransport", "Reply", "normalize_base_url", "ws_url"]

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
        chosen = transport_choice.transport_for(self.http_transport, config.http_transport)
        self._fast = chosen if isinstance(chosen, FastTransport) else None  # gwlab's own: `_send` goes straight to it
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            headers={"user-agent": "gwlab/0.1", "accept": "application/json", **(config.headers or {})},
            transport=chosen, trust_env=self.http_transport.name == "httpx", follow_redirects=False,
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

    @overload
    async def request(self, method: str, path: str, *, family: str, json: Any = None, parse: Parse[T],
                      **options: Unpack[CallOptions]) -> T: ...

    @overload
    async def request(self, method: str, path: str, *, family: str, json: Any = None, parse: None = None,
                      **options: Unpack[CallOptions]) -> Reply: ...

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
            result: T | Reply = parse(body, call.request_id) if parse is not None else Reply(
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
                media_type = media_type_of(response)
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
                learned: dict[str, Any] = {step.name: step.value}
                out = _dialect.adapt_request(replace(out.dialect, **learned), call.family,
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
        content, files, data, params = (options.get("content"), options.get("files"), options.get("data"),
                                        options.get("params"))
        if json is not None:
            content = _dumps(json)
            send_headers["content-type"] = "application/json"
        query = {k: v for k, v in params.items() if v is not None} if params else None  # rule 2: omit unset
        while True:
            request = self._client.build_request(call.method, url, content=content, files=files, data=data,
                                                 params=query, headers=send_headers)
            try:
                response = await self._send(request)
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

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """The answer to a built request, its body unread. Through httpx's `send` (auth flows, redirects,
        event hooks, the cookie jar, its log line), except on gwlab's own fast transport: this client has no
        auth flow, hooks or redirects to follow, so the request goes straight to the transport, and the
        jar is read only when an answer sets a cookie (httpx reads it for every answer: ~45 µs in a one-off timeit, 8 %
        of a frames run's client CPU per row, docs/benchmarks.md). Cookies are still sent: `build_request`
        puts the jar's on every request."""
        if self._fast is None:
            return await self._client.send(request, stream=True)
        response = await self._fast.handle_async_request(request)
        response.request = request
        if "set-cookie" in response.headers:
            self._client.cookies.extract_cookies(response)
        return response

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
        media_type = media_type_of(response)
        if is_json(media_type):
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
