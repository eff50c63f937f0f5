"""The frames layer's one door to the client: a sender, the loop to run on, the ledger's run tag.

Everything the pandas layer needs from `gwlab.client` passes through here, so a change in the client
touches one file. A `Connection` can also be given directly (tests inject faults through one).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gwlab.client.dialect import DialectBook
from gwlab.client.loop import LoopThread
from gwlab.client.transport.retry import RetryPolicy
from gwlab.frames.run.outcome import RunInterrupted
from gwlab.frames.run.runner import Answer, Batch, Runner, RunResult, Sender
from gwlab.wire.families import ProtocolFamily

T = TypeVar("T")




@dataclass
class Connection:
    """How a run reaches a gateway: one attempt per `send`, and the retry rule between attempts."""

    send: Sender
    # the client transport's retry rule (its own for a gateway; the default one for an injected sender)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    loop: asyncio.AbstractEventLoop | None = None  # where the sender's connections live (sync gateways)
    gateway: Any = field(default=None, repr=False)
    origin: str = ""  # the gateway's base URL: checkpointed answers are keyed by it (checkpoint.gateway_id)
    # a model's `max_input_tokens` from the gateway's GET /models (None: not listed, or no such field)
    input_limit: Callable[[str], Awaitable[int | None]] | None = field(default=None, repr=False)
    # what is known of the gateway (client/dialect.py: the structured-output form it refuses, ...); an
    # injected sender gets a book of its own, so what one learns is kept for it alone
    dialects: DialectBook | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.dialects is None:
            self.dialects = DialectBook(f"{self.origin or 'injected'} #{id(self)}")

    def retry_delay(self, error: BaseException, attempt: int) -> float | None:
        """Seconds to wait before attempt `attempt + 1` after `error`, or None: the row fails. Asked of
        the transport's policy as idempotent, since every family a run sends (decisions, chat, responses,
        messages) is an idempotent POST there (`ProtocolFamily.idempotent`): resent as the transport would."""
        return self.retry.delay(error, attempt, idempotent=True)


def connection(gateway: Any) -> Connection:
    """A `Connection` for a Gateway, an AsyncGateway, a Connection, or None (the default gateway)."""
    if isinstance(gateway, Connection):
        return gateway
    from gwlab.client.gateway import AsyncGateway, Gateway

    if gateway is None:
        gateway = _default_gateway()
    if isinstance(gateway, Gateway):
        transport, loop, models = gateway.twin.transport, gateway.loop.loop, gateway.twin.models
    elif isinstance(gateway, AsyncGateway):
        transport, loop, models = gateway.transport, None, gateway.models
    else:
        raise TypeError(f"gateway= takes a gwlab Gateway or AsyncGateway; got {type(gateway).__name__}")

    async def send(family: ProtocolFamily, body: dict[str, Any]) -> Answer:
        # one attempt: the runner retries between attempts by the transport's own policy, so that a
        # 429 can pause every worker of the run instead of only the request that met it
        reply = await transport.request(family.method, family.path, family=family.name, json=body, retries=0)
        return Answer(reply.body, None, reply.request_id)

    async def input_limit(model: str) -> int | None:
        """`max_input_tokens` of `model` in GET /models; None when absent or when the listing fails (a
        gateway without the field, or without /models, is simply not checked)."""
        try:
            listing = await models.list()
        except Exception:
            return None
        limit = next((m.raw.get("max_input_tokens") for m in listing if m.id == model), None)
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    return Connection(send, transport.retry, loop, gateway, origin=_origin(transport), input_limit=input_limit,
                      dialects=transport.dialects)


async def checkpoint_origin(connection: Connection) -> str:
    """Whose answers a run's are, for the checkpoint: an embedded gateway's stable identity in place of its
    URL (its port changes with every start, so a re-run notebook asked every row again), else the origin."""
    gateway = connection.gateway
    transport = getattr(getattr(gateway, "twin", gateway), "transport", None)
    if transport is None or not hasattr(transport, "local_identity"):
        return connection.origin
    local = await transport.local_identity()
    return connection.origin.replace(transport.base_url, local, 1) if local else connection.origin


def _origin(transport: Any) -> str:
    """Whose answers a run's are, for the checkpoint key: the base URL, plus the decisions route and shape
    when the user fixed them (`dialect=`), since one URL may serve different deciders on two routes.
    Detected settings are left out: the server decides them for its URL, and the transport hands every
    decision answer back in System One shape, so a stored answer reads the same whichever way it came."""
    fixed = getattr(getattr(transport, "dialects", None), "fixed", None) or {}
    chosen = " ".join(f"{name}={value}" for name, value in sorted(fixed.items()) if name.startswith("decisions_"))
    return f"{transport.base_url} {chosen}" if chosen else transport.base_url


_default_lock = threading.Lock()


def _default_gateway() -> Any:
    """The gateway the user connected (`gwlab.connect()`'s last), so a batch's calls land in its
    `gw.usage`; with none, `connect()` once (the hosted gateway if configured, else the local one)."""
    from gwlab.connection import current_gateway

    return current_gateway()


@dataclass(frozen=True)
class RunLabel:
    """A run's one id, and the label its calls carry in the client ledger (`gw.usage["run"]`): the same
    id, unless the caller labelled the calls itself (`gwlab.label_calls`), whose label is kept."""

    run_id: str
    ledger: str


def new_run_id(family: str) -> str:
    """`{family}-{UTC time}-{random}`: unique, sortable by time within a family, readable in a ledger."""
    return f"{family}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(4).hex()}"


@contextlib.contextmanager
def run_tag(conn: Connection | None, name: str) -> Iterator[RunLabel]:
    """Label the client ledger's rows of this run (`run` column) with the run's id, which its record
    (`gwlab.runs()`) takes too, so the two join; a label the caller already set stays on the calls."""
    from gwlab.client import ledger

    run_id = new_run_id(name)
    outer = ledger.current_run()
    if outer is not None:
        yield RunLabel(run_id, outer)
        return
    with ledger.label_calls(run_id):
        yield RunLabel(run_id, run_id)


# --- running on a loop, and stopping cleanly ----------------------------------------------------

_STOPPER: contextvars.ContextVar[_Stopper | None] = contextvars.ContextVar("gwlab_stopper", default=None)


class _Stopper:
    """The runners of one synchronous call, so an interrupt can stop them from another thread."""

    def __init__(self) -> None:
        self.runners: list[Any] = []  # Runner, or a task batch: anything with stop()

    def stop(self) -> None:
        for runner in self.runners:
            runner.stop("interrupted")


async def stoppable(runner: Runner, batch: Batch) -> RunResult:
    """Run `batch`; a synchronous caller interrupted meanwhile can stop it (see `run_sync`)."""
    stopper = _STOPPER.get()
    if stopper is not None:
        stopper.runners.append(runner)
    return await runner.run(batch)


_fallback: LoopThread | None = None  # for when the gateway brings no loop (an injected connection)
NO_GATEWAY = object()  # `run_sync`'s gateway for a call that sends nothing: the frames loop, no gateway started


def _loop_for(gateway: Any) -> asyncio.AbstractEventLoop:
    """The loop a synchronous call runs on: the sync gateway's own, else a private one (injected
    connections, a call that sends nothing). An AsyncGateway's connections belong to the caller's loop:
    it must await."""
    global _fallback
    if gateway is NO_GATEWAY:
        gateway = Connection(_sends_nothing)  # no loop of its own: the private one below
    if not isinstance(gateway, Connection):
        from gwlab.client.gateway import AsyncGateway

        if isinstance(gateway, AsyncGateway):
            raise TypeError("an AsyncGateway is used from its own event loop: await df.gw.adecide(...) "
                            "(or achat, arespond, amessages), or pass a sync Gateway")
        gateway = connection(gateway)
    loop: asyncio.AbstractEventLoop | None = gateway.loop  # a Connection's by now
    if loop is not None:
        return loop
    with _default_lock:
        if _fallback is None:
            _fallback = LoopThread("gwlab-frames-loop")
    return _fallback.loop


async def _sends_nothing(family: ProtocolFamily, body: dict[str, Any]) -> Answer:
    """The sender of a call that promised to send nothing (`NO_GATEWAY`): a send is a bug, said loudly."""
    raise RuntimeError(f"a call run without a gateway tried to send {family.name}")


def run_sync(coroutine: Coroutine[Any, Any, T], gateway: Any) -> T:
    """Run on the gateway's private loop thread and wait, also inside Jupyter's running loop.

    A first Ctrl-C (KeyboardInterrupt) stops sending and waits for the requests in flight, so every
    answer already paid for reaches the checkpoint; then the interrupt is raised as `RunInterrupted`, a
    KeyboardInterrupt whose message says how many answers are saved, where, and that a re-run resumes. A second Ctrl-C
    abandons the requests in flight.
    """
    try:
        loop = _loop_for(gateway)
    except BaseException:
        coroutine.close()
        raise
    stopper = _Stopper()

    async def main() -> T:
        _STOPPER.set(stopper)
        return await coroutine

    future = asyncio.run_coroutine_threadsafe(main(), loop)
    try:
        return future.result()
    except KeyboardInterrupt:
        loop.call_soon_threadsafe(stopper.stop)
        value = None
        try:
            value = future.result()
        except KeyboardInterrupt:
            future.cancel()
        except Exception:  # the interrupt is what the caller asked to see
            pass
        summary = getattr(value, "run", None)
        if hasattr(summary, "interrupted_text"):  # say what was kept and how to resume, still as an interrupt
            raise RunInterrupted(summary) from None
        raise


# --- task APIs ------------------------------------------------------------------------------------


def task_client(gateway: Any, family: Any) -> tuple[Any, str]:
    """The generic task client (`gwlab.client.tasks.AsyncTasks`) of `family` on a gateway's transport,
    and the gateway's origin (checkpoint keys are per gateway, as for answers)."""
    from gwlab.client.gateway import AsyncGateway, Gateway
    from gwlab.client.tasks import AsyncTasks

    if gateway is None:
        gateway = _default_gateway()
    if isinstance(gateway, Gateway):
        transport = gateway.twin.transport
    elif isinstance(gateway, AsyncGateway):
        transport = gateway.transport
    else:
        raise TypeError(f"gateway= takes a gwlab Gateway or AsyncGateway for task batches; "
                        f"got {type(gateway).__name__}")
    return AsyncTasks(transport, family), _origin(transport)


def batch_client(gateway: Any, family: str) -> Any:
    """The async batch client a run of `family` sends its jobs through: Anthropic message batches for
    messages rows, OpenAI files + batches for the others."""
    from gwlab.client.gateway import AsyncGateway, Gateway

    if gateway is None:
        gateway = _default_gateway()
    if isinstance(gateway, Gateway):
        gateway = gateway.twin
    if not isinstance(gateway, AsyncGateway):
        raise TypeError(f"batch= needs a gwlab Gateway or AsyncGateway; got {type(gateway).__name__}")
    return gateway.message_batches if family == "messages" else gateway.batches


def stop_on_interrupt(run: Any) -> None:
    """Let a first Ctrl-C of the synchronous call running this coroutine stop `run` (it has `stop()`)."""
    stopper = _STOPPER.get()
    if stopper is not None:
        stopper.runners.append(run)
