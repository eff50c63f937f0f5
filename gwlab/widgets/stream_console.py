"""StreamConsole: type a prompt, watch the answer stream in, stop it, see what it cost."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from gwlab.client.chat import AsyncChat
from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.client.messages import AsyncMessages
from gwlab.client.responses import AsyncResponses
from gwlab.errors import GatewayError, InvalidRequest
from gwlab.widgets._bridge import Bridge, Throttle
from gwlab.widgets._esm import esm_of
from gwlab.wire.families import FAMILIES, TEXT
from gwlab.wire.models import default_model

__all__ = ["PROTOCOLS", "StreamConsole"]

PROTOCOLS = TEXT  # the text families (gwlab.wire.families)


class StreamConsole(anywidget.AnyWidget):
    """A prompt box with Send and Stop; the answer streams in, with tool calls and token usage.

    Parameters
    ----------
    gw : Gateway, optional
        From `gwlab.connect()` (default: the one it returned last). The key stays in the kernel: no trait holds it.
    model : str, optional
        A text model ID; default the text model every chat call uses (``DEFAULT_MODELS["text"]``).
    protocol : {"chat", "responses", "messages"}
        Which endpoint streams the answer.
    max_tokens : int
        Cap on the answer's tokens (sent as the protocol's own field).
    history : bool
        Send earlier turns as conversation context: those that reached their end, capped ones
        included (their text is what the model said); stopped, cut or failed ones are left out.
    **params
        Further request fields (``tools``, ``temperature``, ...), passed through.

    Notes
    -----
    The cell returns at once; the stream runs as a task on the gateway's loop thread and the text
    trait is updated at most `1 / update_interval` times per second. `status` ends as ``completed``
    when the model ended its answer, else as the ending's word (gwlab/wire/endings.py, the ledger's
    `ending`): ``capped`` (the token cap cut it), ``filtered``, ``refused``, ``other``, ``stopped``
    (Stop), ``interrupted`` (a cut connection, or an end marker without its reason), ``failed``; or
    ``error`` when no stream opened. Every one but ``completed`` has ``complete=False`` and a visible
    marker.

    Examples
    --------
    >>> StreamConsole(gw, model="local/gemma-3-270m")            # doctest: +SKIP
    """

    _esm = esm_of(__file__)

    model = traitlets.Unicode().tag(sync=True)
    protocol = traitlets.Enum(PROTOCOLS, default_value="chat").tag(sync=True)
    max_tokens = traitlets.Int(64, min=1).tag(sync=True)
    prompt = traitlets.Unicode("").tag(sync=True)
    text = traitlets.Unicode("").tag(sync=True)
    # idle | streaming | completed | capped | filtered | refused | other | stopped | interrupted | failed | error
    status = traitlets.Unicode("idle").tag(sync=True)
    complete = traitlets.Bool(False).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    tool_calls = traitlets.List(traitlets.Dict()).tag(sync=True)
    usage = traitlets.Dict().tag(sync=True)
    request_id = traitlets.Unicode("").tag(sync=True)
    turns = traitlets.List(traitlets.Dict()).tag(sync=True)  # earlier turns, oldest first
    # no key, token or URL trait: browser state is visible to anyone who opens the notebook

    def __init__(self, gw: Gateway | AsyncGateway | None = None, *, model: str | None = None, protocol: str = "chat",
                 max_tokens: int = 64, history: bool = False, update_interval: float = 0.05, **params: Any) -> None:
        ability = FAMILIES[protocol].ability if protocol in TEXT else None  # else the protocol trait refuses it
        super().__init__(model=default_model(model, ability or "text"), protocol=protocol, max_tokens=max_tokens)
        self._bridge = Bridge(gw)
        self._history = history
        self._params = params
        self._interval = update_interval
        self._future: concurrent.futures.Future[None] | None = None
        self._done = threading.Event()  # set by the task itself, after its last update
        self._done.set()
        self._stop_requested = False
        self.on_msg(self._on_front_end)

    # -- what notebook code (and the front end) calls ----------------------------------------------
    @property
    def busy(self) -> bool:
        """True from `submit` until the stream task has published its end (a cancelled future is
        done at once; the task's cleanup is not)."""
        return not self._done.is_set()

    def submit(self, prompt: str | None = None) -> concurrent.futures.Future[None]:
        """Start streaming an answer to `prompt` (default: the prompt box); returns at once."""
        if prompt is not None:
            self.prompt = prompt
        if self.busy:
            raise RuntimeError("a stream is running; stop() it first")
        if not self.prompt.strip():
            raise InvalidRequest("prompt", "type a prompt first")
        self._archive_turn()
        self.text, self.error, self.tool_calls, self.usage, self.request_id = "", "", [], {}, ""
        self.status, self.complete, self._stop_requested = "streaming", False, False
        self._done.clear()
        self._future = self._bridge.submit(self._stream(self.prompt, self._context()))
        return self._future

    def stop(self) -> None:
        """Stop the running stream; what arrived stays, marked incomplete."""
        if self.busy:
            self._stop_requested = True
            assert self._future is not None
            self._future.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current stream ended and its final text and status are set, also in the cell
        that submitted it (a notebook cell need not wait). TimeoutError when `timeout` passed first."""
        return self._bridge.wait(self._done, timeout, "stream")

    # -- the front end ------------------------------------------------------------------------------
    def _on_front_end(self, _widget: Any, content: Mapping[str, Any], _buffers: Sequence[bytes]) -> None:
        kind = content.get("type")
        try:
            if kind == "send":
                self.submit(str(content.get("prompt", self.prompt)))
            elif kind == "stop":
                self.stop()
        except (InvalidRequest, RuntimeError) as exc:
            self.error = str(exc)

    # -- the stream (runs on the gateway's loop) --------------------------------------------------
    def _context(self) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        if self._history:
            for turn in self.turns:
                if turn.get("status") in _ENDED:
                    messages += [{"role": "user", "content": turn["prompt"]},
                                 {"role": "assistant", "content": turn["text"]}]
        return [*messages, {"role": "user", "content": self.prompt}]

    def _archive_turn(self) -> None:
        if self.status != "idle":
            self.turns = [*self.turns, {"prompt": self.prompt, "text": self.text, "status": self.status,
                                        "complete": self.complete, "usage": self.usage,
                                        "tool_calls": self.tool_calls}]

    async def _stream(self, prompt: str, messages: list[dict[str, str]]) -> None:
        gateway, protocol = self._bridge.gateway, self.protocol
        families: dict[str, AsyncChat | AsyncResponses | AsyncMessages] = {
            "chat": gateway.chat, "responses": gateway.responses, "messages": gateway.messages}
        family = families[protocol]
        cap = FAMILIES[protocol].token_cap
        params = {**self._params, **({cap: self.max_tokens} if cap else {})}
        conversation: Any = messages if len(messages) > 1 else prompt
        stream = None
        throttle = Throttle(lambda: self._publish(stream), self._interval)
        final, error = "error", ""
        try:
            stream = await family.stream(conversation, model=self.model, allow_partial=True, **params)
            async for _event in stream:
                throttle.poke()
            final = _final_status(stream.ending)
        except asyncio.CancelledError:
            final = "stopped" if self._stop_requested else "interrupted"
            if stream is not None:
                await stream.aclose()  # the ledger records it `stopped`
            if not self._stop_requested:
                raise
        except GatewayError as exc:
            final, error = ("failed" if stream is not None else "error"), str(exc)
        except Exception as exc:  # shown in the widget, not lost in a background task
            error = f"{type(exc).__name__}: {exc}"
        finally:
            throttle.cancel()
            self._publish(stream, final=final, error=error)
            self._done.set()

    def _publish(self, stream: Any, *, final: str | None = None, error: str = "") -> None:
        """Snapshot the stream on the gateway's loop; apply it on the kernel's."""
        state: dict[str, Any] = {}
        if stream is not None:
            state = {"text": stream.text, "tool_calls": [_tool_view(c) for c in stream.tool_calls],
                     "usage": _usage_view(stream.usage), "request_id": stream.request_id or ""}
        if final is not None:
            complete = stream is not None and stream.complete and final == "completed"
            state.update(status=final, complete=complete)
            if error:
                state["error"] = error
        self._bridge.post(self._apply, state)

    def _apply(self, state: Mapping[str, Any]) -> None:
        with self.hold_sync():
            for name, value in state.items():
                setattr(self, name, value)


# statuses of turns whose answer reached the protocol's end (a capped one too): sent as history
_ENDED = frozenset({"completed", "capped", "filtered", "refused", "other"})


def _final_status(ending: str) -> str:
    """The console's last status for a stream that ran to its end: `completed`, or how it fell short."""
    return "completed" if ending == "complete" else ending


def _tool_view(call: Any) -> dict[str, str]:
    """A tool call of any protocol as {name, arguments}; messages' tool_use carries an object."""
    arguments = getattr(call, "arguments", None)
    if arguments is None:
        arguments = json.dumps(getattr(call, "input", None))
    return {"name": str(getattr(call, "name", None) or "?"), "arguments": str(arguments)}


def _usage_view(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    view = {name: getattr(usage, name, None) for name in ("input_tokens", "output_tokens")}
    return {name: value for name, value in view.items() if isinstance(value, int)}
