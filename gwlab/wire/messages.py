"""The messages-compatible protocol (protocols.md §4): request body, typed message, stream state.

Content blocks are typed by `type` through one table (unknown types kept as `UnknownBlock`). The
stream is made of named events; `tool_use` input arrives as `input_json_delta` fragments that are
joined and parsed at `content_block_stop`. The message is complete only at `message_stop`; an
`error` event sets `error`; unknown event names become `UnknownEvent`; `ping` is kept as an event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire import _answers as ans
from gwlab.wire import generation as gen
from gwlab.wire._answers import Accumulated, Answer, Kept, Reply, Usage
from gwlab.wire.endings import messages_ending
from gwlab.wire.limits import ANTHROPIC_VERSION
from gwlab.wire.sse import Event, UnknownEvent
from gwlab.wire.tools import ToolSpec, parse_tool

__all__ = [
    "EVENT_TYPES",
    "Message",
    "MessageEvent",
    "MessagesAccumulator",
    "MessagesRequest",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "UnknownBlock",
    "Usage",
    "build_request",
    "parse_block",
    "parse_request",
    "parse_response",
]

ROLES = ("user", "assistant")
# the version anthropic SDK 2.x sends refuses sampling parameters (protocols.md section 4.2)
NO_SAMPLING_VERSION = "2026-10-21"
SAMPLING_FIELDS = ("temperature", "top_p", "top_k")
_TEXT = {"text": "text"}


# --- the request ---------------------------------------------------------------------------------


def build_request(messages: str | Sequence[Mapping[str, Any]], *, model: str, max_tokens: int,
                  stream: bool = False, **params: Any) -> dict[str, Any]:
    """The JSON body of `POST /messages`; a bare string is one user message. System text goes in
    `system=`, not in a message (the protocol has no system role). Checked by `parse_request`, the
    gateway's validator, before it leaves."""
    fields = {"model": model, "max_tokens": max_tokens, "messages": gen.turns(messages)}
    return gen.build(parse_request, fields, params, stream)


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """A messages body the validator accepted: what a gateway needs, typed; the whole body in `body`."""

    model: str
    max_tokens: int
    system: str | list[Mapping[str, Any]] | None
    messages: list[Mapping[str, Any]]
    tools: list[gen.Tool]  # custom (function) tools as ToolSpec; server tools kept as sent
    tool_choice: gen.ToolChoice
    stop: tuple[str, ...]  # stop_sequences
    sampling: dict[str, float]
    stream: bool
    body: Mapping[str, Any] = field(repr=False)
    seed: int | None = None  # the protocol has neither: the same names as chat's, for the gateway's plan
    response_schema: dict[str, Any] | None = None


def parse_request(body: Any, version: str = ANTHROPIC_VERSION) -> MessagesRequest:
    """Validate a messages body sent under `anthropic-version: version`; raises only `InvalidRequest`,
    naming the field as the gateway's error message does."""
    model = gen.model_of(body)
    gen.required(body, "max_tokens", int, hint="a positive integer, the cap on the answer's tokens")
    max_tokens = gen.count(body, "max_tokens") or 1
    system = body.get("system")
    if system is not None:
        gen.content(system, "system", _TEXT)
    messages = gen.object_list(body, "messages", "a non-empty array of {role, content} objects")
    for i, message in enumerate(messages):
        _message(message, f"messages[{i}]")
    tools = gen.tools(body, _tool)
    choice = gen.tool_choice(body, gen.specs(tools), "messages")
    stop = gen.stop(body, "stop_sequences", allow_string=False)
    if version == NO_SAMPLING_VERSION:
        for name in SAMPLING_FIELDS:
            if body.get(name) is not None:
                raise InvalidRequest(name, f"is not accepted under anthropic-version {NO_SAMPLING_VERSION}")
    sampling = gen.sampling(body, "messages")
    gen.count(body, "top_k", 0)
    for name in ("metadata", "thinking"):
        gen.optional(body, name, dict)
    return MessagesRequest(model, max_tokens, system, list(messages), tools, choice, stop, sampling,
                           bool(gen.optional(body, "stream", bool)), body)


def _message(message: Mapping[str, Any], where: str) -> None:
    hint = "; put system text in system=" if message.get("role") == "system" else ""
    role = gen.role(message, where, ROLES, hint)
    content = message.get("content")
    gen.content(content, f"{where}.content", _TEXT)
    for j, block in enumerate(content if isinstance(content, list) else ()):
        _block(block, role, f"{where}.content[{j}]")


def _block(block: Mapping[str, Any], role: str, at: str) -> None:
    kind = block["type"]
    if kind in _BLOCK_ROLES and _BLOCK_ROLES[kind] != role:
        raise InvalidRequest(f"{at}.type", f"a {kind} block belongs in a{'n' if role == 'user' else ''} "
                                           f"{_BLOCK_ROLES[kind]} message")
    if kind == "tool_use":
        for name, kind_of in (("id", str), ("name", str), ("input", dict)):
            gen.required(block, name, kind_of, path=f"{at}.{name}")
    elif kind == "tool_result":
        gen.required(block, "tool_use_id", str, path=f"{at}.tool_use_id", hint="the id of the tool_use it answers")
        gen.content(block.get("content", ""), f"{at}.content", _TEXT)
        gen.optional(block, "is_error", bool, path=f"{at}.is_error")


_BLOCK_ROLES = {"tool_use": "assistant", "tool_result": "user"}


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    if tool.get("type", "custom") != "custom":
        return None  # server tools (web search, code execution): the gateway says whether it has them
    gen.required(tool, "input_schema", dict, path=f"{where}.input_schema", hint="a JSON Schema object")
    return parse_tool(tool, where)


# --- typed results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextBlock(Kept):
    text: str
    type: str = "text"


@dataclass(frozen=True, slots=True)
class ToolUseBlock(Kept):
    """A tool the model asks the caller to run; `input` is a JSON object (not a string). When the
    streamed fragments did not form valid JSON, `input` is None and `input_json` keeps them."""

    id: str | None
    name: str | None
    input: Any
    input_json: str | None = None
    type: str = "tool_use"

    @property
    def arguments(self) -> str:
        """The input as a JSON string, as the other families carry a call's arguments."""
        return json.dumps(self.input) if self.input is not None else self.input_json or ""

    def result(self, content: Any, *, is_error: bool = False) -> dict[str, Any]:
        """The `tool_result` block answering this call (send it in the next user message)."""
        block = {"type": "tool_result", "tool_use_id": self.id, "content": content}
        return {**block, "is_error": True} if is_error else block

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ToolUseBlock:
        return cls(data.get("id"), data.get("name"), data.get("input"), data.get("_input_json"),
                   raw={k: v for k, v in data.items() if k != "_input_json"})


@dataclass(frozen=True, slots=True)
class ThinkingBlock(Kept):
    """The model's visible reasoning; send it back with its `signature` unchanged in the next turn."""

    thinking: str
    signature: str | None = None
    type: str = "thinking"

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ThinkingBlock:
        return cls(str(data.get("thinking") or ""), data.get("signature"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class UnknownBlock(Kept):
    type: str


Block = TextBlock | ToolUseBlock | ThinkingBlock | UnknownBlock

_BLOCK_TYPES: dict[str, Callable[[Mapping[str, Any]], Block]] = {
    "text": lambda data: TextBlock(str(data.get("text") or ""), raw=dict(data)),
    "tool_use": ToolUseBlock.from_wire,
    "thinking": ThinkingBlock.from_wire,
}


def parse_block(data: Any) -> Block:
    """One content block, typed by its `type`; unknown types (and non-objects) kept as UnknownBlock."""
    return ans.by_type(data, _BLOCK_TYPES, lambda kind, raw: UnknownBlock(kind, raw=raw))


@dataclass(frozen=True, slots=True)
class Message(Reply, Answer):
    """A messages-protocol answer: typed content blocks and usage; everything else in `raw`."""

    ITEMS, TEXT_ITEM, CALL_ITEM = "content", TextBlock, ToolUseBlock

    role: str | None
    content: list[Block]
    stop_reason: str | None = None

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py): no stop_reason means it never ended."""
        return messages_ending(self.stop_reason)

    @classmethod
    def from_wire(cls, data: Any, request_id: str | None = None) -> Message:
        data = data if isinstance(data, Mapping) else {}
        content = [parse_block(block) for block in data.get("content") or ()]
        return cls(data.get("id"), data.get("model"), data.get("role"), content, data.get("stop_reason"),
                   usage=Usage.from_wire(data.get("usage")), request_id=request_id, raw=dict(data))

    def __repr__(self) -> str:
        return ans.summary("Message", model=self.model, text=self.text, tool_calls=[c.name for c in self.tool_calls],
                       stop_reason=self.stop_reason, usage=self.usage)

    def _repr_html_(self) -> str:
        return ans.items_table(f"{self.model or '?'} · stop {self.stop_reason}", self.request_id, "block", self.content)


def parse_response(data: Any, request_id: str | None = None) -> Message:
    return Message.from_wire(data, request_id)


# --- streaming -----------------------------------------------------------------------------------

EVENT_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop", "ping", "error"})


@dataclass(frozen=True, slots=True)
class MessageEvent(Kept):
    type: str
    index: int | None = None
    delta: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """Answer text this event adds (a `text_delta` only)."""
        if self.delta is not None and self.delta.get("type") == "text_delta":
            return self.delta.get("text") or ""
        return ""


class MessagesAccumulator(Accumulated):
    """Assembles a messages stream by content-block `index`; complete only at `message_stop`."""

    def __init__(self) -> None:
        self.events: list[MessageEvent | UnknownEvent] = []
        self.stopped = False  # `message_stop` arrived
        self.error: Mapping[str, Any] | None = None
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._parts: dict[int, list[str]] = {}  # text, thinking or partial_json pieces per block

    @property
    def status(self) -> str:
        """in_progress | completed | interrupted (`message_stop` with no stop_reason) | error."""
        return ans.stream_status(self.error, self.stopped, bool(self._message.get("stop_reason")))

    def add(self, event: Event) -> list[MessageEvent | UnknownEvent]:
        data = ans.typed_payload(event, EVENT_TYPES, self.events)
        if isinstance(data, UnknownEvent):
            return [data]
        delta = got if isinstance(got := data.get("delta"), Mapping) else None
        return self._dispatch(MessageEvent(data["type"], ans.integer(data.get("index")), delta, raw=data), data)

    @ans.handles("message_start")
    def _on_message_start(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        message = data.get("message")
        if isinstance(message, Mapping):
            self._message = dict(message)
            if isinstance(message.get("usage"), Mapping):
                self._usage.update(message["usage"])

    @ans.handles("content_block_start")
    def _on_block_start(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        block = data.get("content_block")
        if event.index is not None and isinstance(block, Mapping):
            self._blocks[event.index] = dict(block)
            self._parts[event.index] = []

    @ans.handles("content_block_delta")
    def _on_block_delta(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        delta, index = event.delta, event.index
        if delta is None or index is None:
            return
        key = _DELTA_FIELDS.get(delta.get("type"))
        if key is not None and isinstance(delta.get(key), str):
            self._parts.setdefault(index, []).append(delta[key])

    @ans.handles("content_block_stop")
    def _on_block_stop(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        if event.index is not None and event.index in self._blocks:
            self._blocks[event.index] = self._assembled(event.index)
            self._parts[event.index] = []

    @ans.handles("message_delta")
    def _on_message_delta(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        if event.delta is not None:
            self._message.update({k: v for k, v in event.delta.items() if k in _DELTA_MESSAGE_FIELDS})
        if isinstance(data.get("usage"), Mapping):
            self._usage.update(data["usage"])  # output_tokens is cumulative: the latest wins

    @ans.handles("message_stop")
    def _on_message_stop(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        self.stopped = True

    @ans.handles("error")
    def _on_error(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        error = data.get("error")
        self.error = dict(error) if isinstance(error, Mapping) else {"message": str(error)}

    def _assembled(self, index: int) -> dict[str, Any]:
        block = dict(self._blocks[index])
        parts = self._parts.get(index) or []
        kind = block.get("type")
        if kind == "tool_use":
            if parts:
                joined = "".join(parts)
                try:
                    block["input"] = json.loads(joined) if joined.strip() else {}
                except ValueError:
                    block["input"], block["_input_json"] = None, joined
        elif kind in ("text", "thinking") and parts:
            block[kind] = (block.get(kind) or "") + "".join(parts)
        return block

    @property
    def text(self) -> str:
        return self.result().text

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        return self.result().tool_calls

    @property
    def usage(self) -> Usage | None:
        return Usage.from_wire(self._usage) if self._usage else None

    def result(self) -> Message:
        """The message as far as it arrived (blocks still open are assembled from their pieces)."""
        body = {**self._message, "content": [self._assembled(i) for i in sorted(self._blocks)]}
        if self._usage:
            body["usage"] = dict(self._usage)
        return Message.from_wire(body)


_DELTA_MESSAGE_FIELDS = ("stop_reason", "stop_sequence")
_DELTA_FIELDS: dict[str | None, str] = {"text_delta": "text", "input_json_delta": "partial_json",
                                        "thinking_delta": "thinking"}

