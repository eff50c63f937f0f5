"""The gateway: `AsyncGateway` does the I/O, `Gateway` runs it on a private loop thread.

A protocol family is an attribute built from the shared transport, one line each in
`AsyncGateway.__init__` and one line in `Gateway.__init__` (the sync twin wraps the async family
with the loop thread); every family class takes `(transport)`, every sync twin `(twin, loop)`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Unpack

from gwlab.client.batches import AsyncBatches, AsyncMessageBatches, Batches, MessageBatches
from gwlab.client.chat import AsyncChat, Chat
from gwlab.client.config import ClientConfig, ClientOptions
from gwlab.client.decisions import AsyncDecisions, Decisions, Questions, State
from gwlab.client.dialect import Dialect
from gwlab.client.embeddings import AsyncEmbeddings, Embeddings
from gwlab.client.images import AsyncImages, Images
from gwlab.client.ledger import Ledger
from gwlab.client.loop import LoopThread
from gwlab.client.messages import AsyncMessages, Messages
from gwlab.client.migration import Migrate, Migrated, responses_from_chat
from gwlab.client.models import AsyncModels, Models
from gwlab.client.realtime import AsyncRealtime, Realtime
from gwlab.client.responses import AsyncResponses, Responses
from gwlab.client.tasks import AsyncTasks, Tasks
from gwlab.client.tools import AsyncTools, Tools
from gwlab.client.transport.choice import TransportChoice
from gwlab.client.transport.core import AsyncTransport
from gwlab.client.videos import AsyncVideos, Videos
from gwlab.wire.decisions import DecisionResult
from gwlab.wire.jobs.tasks import TaskFamily

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AsyncGateway", "Gateway"]



class AsyncGateway:
    """An async client of one gateway: `await gw.models()`, `await gw.chat(...)`, `gw.usage`.

    Parameters
    ----------
    base_url : `{api_host}` or `{api_host}/v1`; /v1 is added once, never twice.
    api_key : a key issued by this gateway; kept private, never shown or logged.
    config : a `ClientConfig` to start from (the keyword options below are applied over it).
    timeout, connect_timeout : seconds of silence allowed while reading, and to connect.
    deadline : seconds for a whole call, retries and stream included (None: no limit).
    max_retries, retry_after_cap : the retry policy (see `gwlab.client.transport.retry`).
    ledger_path : a SQLite file that keeps the request ledger across sessions.
    messages_auth, anthropic_version : the messages family's auth header and version.
    headers : extra headers for every request.
    http_transport : "auto" (default: the fast path for an http:// gateway on loopback that no proxy
        setting applies to, httpx's transport with the environment's proxies for any other), "fast",
        "httpx", or an httpx transport object (tests). `gw.http_transport` shows the choice and why.
    dialect : how this gateway differs from the spec, e.g. `{"decisions_path": "/systemone"}` (a mapping
        or a `gwlab.Dialect`; keys decisions_path, decisions_shape, token_cap). Settings given here win;
        the others are detected and shown by `repr(gw)` and `gw.dialect` (docs/guide/byo-gateway.md).
    """

    def __init__(self, base_url: str, api_key: str, *, config: ClientConfig | None = None,
                 **options: Unpack[ClientOptions]) -> None:
        self.config = ClientConfig.of(config, **options)
        self.ledger = Ledger(self.config.ledger_path)
        self.transport = AsyncTransport(base_url, api_key, config=self.config, ledger=self.ledger)
        # the families: adding one is one line here and one in Gateway.__init__
        self.models = AsyncModels(self.transport)
        self.chat = AsyncChat(self.transport)
        self.responses = AsyncResponses(self.transport)
        self.messages = AsyncMessages(self.transport)
        self.realtime = AsyncRealtime(self.transport)
        self.decisions = AsyncDecisions(self.transport)
        self.embeddings = AsyncEmbeddings(self.transport)
        self.videos = AsyncVideos(self.transport)
        self.images = AsyncImages(self.transport)
        self.tools = AsyncTools(self.transport)
        self.batches = AsyncBatches(self.transport)  # OpenAI files + batches
        self.message_batches = AsyncMessageBatches(self.transport)  # Anthropic message batches
        self.migrate = Migrate()  # pure conversions: one object serves both faces
        self._owned: list[Any] = []  # what `own` was given: stopped by aclose

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    @property
    def ws_base_url(self) -> str:
        return self.transport.ws_base_url

    @property
    def dialect(self) -> Dialect:
        """How this gateway differs from the spec: each setting with explicit/default/detected provenance."""
        return self.transport.dialect

    @property
    def http_transport(self) -> TransportChoice:
        """How requests reach the gateway ("fast", "httpx" or "custom"), through which proxy, and why."""
        return self.transport.http_transport

    @property
    def usage(self) -> pd.DataFrame:
        """Every call so far, one row each (keys and inputs never included)."""
        return self.ledger.to_frame()

    async def decide(self, state: State, questions: Questions, *, model: str | None = None,
                     **extra: Any) -> DecisionResult:
        """`decisions.create`: typed answers to every question about `state`, validated before sending.

        Without `model`, the decision model, as every call defaults to its family's
        (`gwlab.wire.models.DEFAULT_MODELS`: chat, responses and messages to the text model).
        """
        return await self.decisions.create(state, questions, model=model, **extra)

    async def responses_from_chat(self, **chat_kwargs: Any) -> Migrated:
        """A chat-shaped request sent through the responses protocol; both views of the answer."""
        return await responses_from_chat(self.responses, **chat_kwargs)

    def tasks(self, family: TaskFamily) -> AsyncTasks:
        """A client for any task API, given its description (`gwlab.TaskFamily`)."""
        return AsyncTasks(self.transport, family)

    def own(self, resource: Any) -> None:
        """Stop `resource` (anything with `stop()`) when this gateway closes, after its connections: a
        server the caller started for this gateway lives as long as the gateway does."""
        self._owned.append(resource)

    async def aclose(self) -> None:
        await self.transport.aclose()
        self.ledger.close()
        while self._owned:
            self._owned.pop().stop()

    async def __aenter__(self) -> AsyncGateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        via = _proxy_repr(self.http_transport)
        return f"AsyncGateway(base_url={self.base_url!r}{via}{_dialect_repr(self.dialect)})"


class Gateway:
    """The synchronous gateway: the same methods as `AsyncGateway`, usable in a running notebook.

    Each call runs the async twin on a private event-loop thread, so it works inside Jupyter's
    loop without nest_asyncio. `close()` (or the end of a `with` block, or garbage collection
    when a cell rebinds the name) closes the connections on that loop, quietly.
    """

    def __init__(self, base_url: str, api_key: str, *, config: ClientConfig | None = None,
                 **options: Unpack[ClientOptions]) -> None:
        config = ClientConfig.of(config, **options)  # checked here, before a thread starts
        self._loop = LoopThread()
        try:
            self._twin = self._loop.run(_build(base_url, api_key, config))
        except BaseException:
            self._loop.close()
            raise
        self._owned: list[Any] = []  # the embedded gateway connect() started: it lives as long as we do
        self._finalizer = weakref.finalize(self, _close, self._loop, self._twin, self._owned)
        self.models = Models(self._twin.models, self._loop)
        self.chat = Chat(self._twin.chat, self._loop)
        self.responses = Responses(self._twin.responses, self._loop)
        self.messages = Messages(self._twin.messages, self._loop)
        self.realtime = Realtime(self._twin.realtime, self._loop)
        self.decisions = Decisions(self._twin.decisions, self._loop)
        self.embeddings = Embeddings(self._twin.embeddings, self._loop)
        self.videos = Videos(self._twin.videos, self._loop)
        self.images = Images(self._twin.images, self._loop)
        self.tools = Tools(self._twin.tools, self._loop)
        self.batches = Batches(self._twin.batches, self._loop)
        self.message_batches = MessageBatches(self._twin.message_batches, self._loop)
        self.migrate = self._twin.migrate

    @property
    def base_url(self) -> str:
        return self._twin.base_url

    @property
    def ws_base_url(self) -> str:
        return self._twin.ws_base_url

    @property
    def dialect(self) -> Dialect:
        """How this gateway differs from the spec: each setting with explicit/default/detected provenance."""
        return self._twin.dialect

    @property
    def http_transport(self) -> TransportChoice:
        """How requests reach the gateway ("fast", "httpx" or "custom"), through which proxy, and why."""
        return self._twin.http_transport

    @property
    def ledger(self) -> Ledger:
        return self._twin.ledger

    @property
    def usage(self) -> pd.DataFrame:
        """Every call so far, one row each (keys and inputs never included)."""
        return self._twin.usage

    def decide(self, state: State, questions: Questions, *, model: str | None = None,
               **extra: Any) -> DecisionResult:
        """`decisions.create`: typed answers to every question about `state`, validated before sending.

        Without `model`, the decision model, as every call defaults to its family's
        (`gwlab.wire.models.DEFAULT_MODELS`: chat, responses and messages to the text model).
        """
        return self._loop.run(self._twin.decide(state, questions, model=model, **extra))

    def responses_from_chat(self, **chat_kwargs: Any) -> Migrated:
        """A chat-shaped request sent through the responses protocol; both views of the answer."""
        return self._loop.run(self._twin.responses_from_chat(**chat_kwargs))

    def tasks(self, family: TaskFamily) -> Tasks:
        """A client for any task API, given its description (`gwlab.TaskFamily`)."""
        return Tasks(self._twin.tasks(family), self._loop)

    @property
    def config(self) -> ClientConfig:
        """How this client reaches its gateway: timeouts, retries, headers, transport, dialect (no key)."""
        return self._twin.config

    @property
    def twin(self) -> AsyncGateway:
        """The async gateway underneath (it lives on this gateway's loop thread)."""
        return self._twin

    @property
    def loop(self) -> LoopThread:
        return self._loop

    def own(self, resource: Any) -> None:
        """Stop `resource` (anything with `stop()`) when this gateway closes, after its connections and its
        loop thread: how `connect()` ties the embedded gateway it started to the object the user closes."""
        self._owned.append(resource)

    def close(self) -> None:
        """Close connections (on their own loop) and the loop thread; a second call does nothing."""
        self._finalizer()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        local = ", local" if self._owned else ""
        return (f"Gateway(base_url={self.base_url!r}{local}{_proxy_repr(self.http_transport)}"
                f"{_dialect_repr(self.dialect)})")


def _proxy_repr(choice: TransportChoice) -> str:
    """A proxy from the environment is the one transport detail worth a surprise: shown, never its credentials."""
    return f", via proxy {choice.proxy}" if choice.proxy else ""


def _dialect_repr(dialect: Dialect) -> str:
    """The settings that differ from the spec, each with where it came from (never silent magic)."""
    changes = dialect.changes()
    if not changes:
        return ""
    shown = ", ".join(f"{name}={value!r} ({source})" for name, (value, source) in changes.items())
    return f", dialect: {shown}"


async def _build(base_url: str, api_key: str, config: ClientConfig) -> AsyncGateway:
    return AsyncGateway(base_url, api_key, config=config)  # built on the loop that will use it


def _close(loop: LoopThread, twin: AsyncGateway, owned: list[Any]) -> None:
    loop.close(cleanup=twin.aclose)
    while owned:
        owned.pop().stop()
