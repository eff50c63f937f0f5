"""The messages-compatible protocol (protocols.md §4): request body, typed message, stream state.

Content blocks are typed by `type` through one table (unknown types kept as `UnknownBlock`). The
stream is made of named events; `tool_use` input arrives as `input_json_delta` fragments that are
joined and parsed at `content_block_stop`. The message is complete only at `message_stop`; an
`error` event sets `error`; unknown event names become `UnknownEvent`; `ping` is kept as an event.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire.endings import COMPLETE, FAILED, INTERRUPTED, messages_ending
from gwlab.wire.models import check_model_id
from gwlab.wire.sse import Event, UnknownEvent

__all__ = [
    "EVENT_TYPES",
    "Message",
    "MessageEvent",
    "MessagesAccumulator",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "UnknownBlock",
    "Usage",
    "build_request",
    "parse_block",
    "parse_response",
]

ROLES = ("user", "assistant")


# --- the request ---------------------------------------------------------------------------------


def build_request(messages: str | Sequence[Mapping[str, Any]], *, model: str, max_tokens: int,
                  stream: bool = False, **params: Any) -> dict[str, Any]:
    """The JSON body of `POST /messages`; a bare string is one user message. System text goes in
    `system=`, not in a message (the protocol has no system role)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidRequest("max_tokens", f"required: a positive integer; got {max_tokens!r}")
    body: dict[str, Any] = {"model": check_model_id(model), "max_tokens": max_tokens,
                            "messages": _messages(messages)}
    if params.get("tools") is not None:
        _tools(params["tools"])
    body.update((key, value) for key, value in params.items() if value is not None)
    if stream:
        body["stream"] = True
    return body


def _messages(messages: Any) -> list[Mapping[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence) or isinstance(messages, bytes | bytearray) or not messages:
        raise InvalidRequest("messages", "required: a non-empty list of {role, content} objects, or a string")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidRequest(f"messages[{i}]", f"must be an object; got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            hint = "; put system text in system=" if role == "system" else ""
            raise InvalidRequest(f"messages[{i}].role", f"must be 'user' or 'assistant'; got {role!r}{hint}")
        if "content" not in message:
            raise InvalidRequest(f"messages[{i}].content", "required")
    return list(messages)


def _tools(tools: Any) -> None:
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise InvalidRequest("tools", "must be a list of tool objects")
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not tool.get("name"):
            raise InvalidRequest(f"tools[{i}].name", "required")
        if tool.get("type", "custom") == "custom" and not isinstance(tool.get("input_schema"), Mapping):
            raise InvalidRequest(f"tools[{i}].input_schema", "required: a JSON Schema object")


# --- typed results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_wire(cls, data: Any) -> Usage | None:
        if not isinstance(data, Mapping):
            return None
        return cls(_int(data.get("input_tokens")), _int(data.get("output_tokens")), raw=dict(data))


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: str = "text"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> TextBlock:
        return cls(data.get("text") or "", raw=dict(data))


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool the model asks the caller to run; `input` is a JSON object (not a string). When the
    streamed fragments did not form valid JSON, `input` is None and `input_json` keeps them."""

    id: str | None
    name: str | None
    input: Any
    input_json: str | None = None
    type: str = "tool_use"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def result(self, content: Any, *, is_error: bool = False) -> dict[str, Any]:
        """The `tool_result` block answering this call (send it in the next user message)."""
        block = {"type": "tool_result", "tool_use_id": self.id, "content": content}
        return {**block, "is_error": True} if is_error else block

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ToolUseBlock:
        return cls(data.get("id"), data.get("name"), data.get("input"), data.get("_input_json"),
                   raw={k: v for k, v in data.items() if k != "_input_json"})


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    thinking: str
    type: str = "thinking"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ThinkingBlock:
        return cls(data.get("thinking") or "", raw=dict(data))


@dataclass(frozen=True, slots=True)
class UnknownBlock:
    type: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


Block = TextBlock | ToolUseBlock | ThinkingBlock | UnknownBlock

_BLOCK_TYPES: dict[str, Callable[[Mapping[str, Any]], Block]] = {
    "text": TextBlock.from_wire,
    "tool_use": ToolUseBlock.from_wire,
    "thinking": ThinkingBlock.from_wire,
}


def parse_block(data: Any) -> Block:
    if not isinstance(data, Mapping):
        return UnknownBlock(type(data).__name__, {"value": data})
    kind = data.get("type")
    parse = _BLOCK_TYPES.get(kind) if isinstance(kind, str) else None
    return parse(data) if parse is not None else UnknownBlock(str(kind), dict(data))


@dataclass(frozen=True, slots=True)
class Message:
    """A messages-protocol answer: typed content blocks and usage; everything else in `raw`."""

    id: str | None
    model: str | None
    role: str | None
    content: list[Block]
    stop_reason: str | None = None
    usage: Usage | None = None
    request_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py): no stop_reason means it never ended."""
        return messages_ending(self.stop_reason)

    @classmethod
    def from_wire(cls, data: Any, request_id: str | None = None) -> Message:
        data = data if isinstance(data, Mapping) else {}
        content = [parse_block(block) for block in data.get("content") or ()]
        return cls(data.get("id"), data.get("model"), data.get("role"), content, data.get("stop_reason"),
                   Usage.from_wire(data.get("usage")), request_id, raw=dict(data))

    def __repr__(self) -> str:
        calls = f", tool_calls={[c.name for c in self.tool_calls]}" if self.tool_calls else ""
        usage = ("usage n/a" if self.usage is None
                 else f"{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens")
        return (f"Message(model={self.model!r}, text={_clip(self.text)!r}{calls}, "
                f"stop_reason={self.stop_reason!r}, usage={usage})")

    def _repr_html_(self) -> str:
        rows = []
        for i, block in enumerate(self.content):
            if isinstance(block, TextBlock):
                shown = block.text
            elif isinstance(block, ToolUseBlock):
                shown = f"{block.name}({json.dumps(block.input)}) id={block.id}"
            else:
                shown = json.dumps(dict(block.raw), default=str)[:200]
            rows.append(f"<tr><td>{i}</td><td>{html.escape(block.type)}</td>"
                        f"<td style='white-space:pre-wrap'>{html.escape(shown)}</td></tr>")
        caption = html.escape(f"{self.model or '?'} · stop {self.stop_reason}"
                              + (f" · request {self.request_id}" if self.request_id else ""))
        return (f"<table><caption>{caption}</caption><thead><tr><th>#</th><th>block</th><th>content</th></tr>"
                f"</thead><tbody>{''.join(rows)}</tbody></table>")


def parse_response(data: Any, request_id: str | None = None) -> Message:
    return Message.from_wire(data, request_id)


# --- streaming -----------------------------------------------------------------------------------

EVENT_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop", "ping", "error"})


@dataclass(frozen=True, slots=True)
class MessageEvent:
    type: str
    index: int | None = None
    delta: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        """Answer text this event adds (a `text_delta` only)."""
        if self.delta is not None and self.delta.get("type") == "text_delta":
            return self.delta.get("text") or ""
        return ""


class MessagesAccumulator:
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
        if self.error is not None:
            return "error"
        if not self.stopped:
            return "in_progress"
        return "completed" if self._message.get("stop_reason") else "interrupted"

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py), as far as the stream tells."""
        status = self.status
        if status == "error":
            return FAILED
        return messages_ending(self._message.get("stop_reason")) if status == "completed" else INTERRUPTED

    @property
    def complete(self) -> bool:
        """The model ended its turn: `message_stop` after a stop_reason that is not a cap or refusal."""
        return self.ending == COMPLETE

    def add(self, event: Event) -> list[MessageEvent | UnknownEvent]:
        try:
            data = json.loads(event.data)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            unknown = UnknownEvent(event.event, {"data": event.data})
            self.events.append(unknown)
            return [unknown]
        kind = data.get("type") if isinstance(data.get("type"), str) else event.event
        if kind not in EVENT_TYPES:
            unknown = UnknownEvent(kind, data)
            self.events.append(unknown)
            return [unknown]
        delta = data.get("delta") if isinstance(data.get("delta"), Mapping) else None
        typed = MessageEvent(kind, _int(data.get("index")), delta, data)
        self.events.append(typed)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, typed, data)
        return [typed]

    def _on_message_start(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        message = data.get("message")
        if isinstance(message, Mapping):
            self._message = dict(message)
            if isinstance(message.get("usage"), Mapping):
                self._usage.update(message["usage"])

    def _on_block_start(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        block = data.get("content_block")
        if event.index is not None and isinstance(block, Mapping):
            self._blocks[event.index] = dict(block)
            self._parts[event.index] = []

    def _on_block_delta(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        delta, index = event.delta, event.index
        if delta is None or index is None:
            return
        key = _DELTA_FIELDS.get(delta.get("type"))
        if key is not None and isinstance(delta.get(key), str):
            self._parts.setdefault(index, []).append(delta[key])

    def _on_block_stop(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        if event.index is not None and event.index in self._blocks:
            self._blocks[event.index] = self._assembled(event.index)
            self._parts[event.index] = []

    def _on_message_delta(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        if event.delta is not None:
            self._message.update({k: v for k, v in event.delta.items() if k in _DELTA_MESSAGE_FIELDS})
        if isinstance(data.get("usage"), Mapping):
            self._usage.update(data["usage"])  # output_tokens is cumulative: the latest wins

    def _on_message_stop(self, event: MessageEvent, data: Mapping[str, Any]) -> None:
        self.stopped = True

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
_DELTA_FIELDS = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}

_Handler = Callable[[MessagesAccumulator, MessageEvent, Mapping[str, Any]], None]
_HANDLERS: dict[str, _Handler] = {
    "message_start": MessagesAccumulator._on_message_start,
    "content_block_start": MessagesAccumulator._on_block_start,
    "content_block_delta": MessagesAccumulator._on_block_delta,
    "content_block_stop": MessagesAccumulator._on_block_stop,
    "message_delta": MessagesAccumulator._on_message_delta,
    "message_stop": MessagesAccumulator._on_message_stop,
    "error": MessagesAccumulator._on_error,
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
