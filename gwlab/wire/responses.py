"""The responses protocol (protocols.md §3): request body, typed response and items, stream state.

Items are dispatched by `type` through one table; a type it lacks becomes `UnknownItem` with its
wire object, never dropped (spec: output[0] is not necessarily text). Stream events are dispatched
by `type` and update state by `output_index`, `content_index` and `item_id`; an event type outside
the SDK 3.54 union becomes `UnknownEvent`. A round is complete only at `response.completed`;
`response.failed`, `response.incomplete` and `error` are distinct outcomes, read from `status`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire import _answers as ans
from gwlab.wire import generation as gen
from gwlab.wire._answers import Accumulated, Answer, Call, Kept, Reply, Usage
from gwlab.wire.endings import responses_ending
from gwlab.wire.sse import Event, UnknownEvent
from gwlab.wire.tools import ToolSpec, parse_tool

__all__ = [
    "EVENT_TYPES",
    "FunctionCall",
    "MessageItem",
    "ReasoningItem",
    "Response",
    "ResponseEvent",
    "ResponsesAccumulator",
    "ResponsesRequest",
    "UnknownItem",
    "Usage",
    "WebSearchCall",
    "build_request",
    "parse_item",
    "parse_request",
    "parse_response",
]

# --- the request ---------------------------------------------------------------------------------


ROLES = ("user", "system", "developer", "assistant")
TRUNCATIONS = ("auto", "disabled")
MAX_METADATA_KEYS = 16
# the text each message content part carries; other part types (input_image, input_file) have no text
_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_OUTPUT_PARTS = {"input_text": "text"}


def build_request(input: str | Sequence[Mapping[str, Any]], *, model: str, stream: bool = False,
                  **params: Any) -> dict[str, Any]:
    """The JSON body of `POST /responses`, checked by `parse_request` (the gateway's validator) before it
    leaves. `instructions` are never inherited through `previous_response_id` (spec, migration rule 2):
    pass them again on every call that needs them."""
    body = gen.build(parse_request, {"model": model, "input": input if isinstance(input, str) else gen.turns(input)},
                     params, stream)
    if isinstance(body.get("tools"), list):
        body["tools"] = [_strict_stated(tool) for tool in body["tools"]]
    return body


def _strict_stated(tool: Any) -> Any:
    """A function tool with `strict`, which the official schema requires: null when the caller left it out
    (the server's default applies; nothing is guessed). The caller's dict is not changed."""
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "strict" not in tool:
        return {**tool, "strict": None}
    return tool


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    """A responses body the validator accepted: what a gateway needs, typed; the whole body in `body`."""

    model: str
    input: str | list[Mapping[str, Any]]  # items typed by `type` ("message" when only a role is given)
    instructions: str | None
    previous_response_id: str | None
    tools: list[gen.Tool]  # function tools as ToolSpec; other types kept as sent
    tool_choice: gen.ToolChoice
    format: Mapping[str, Any]  # text.format as sent ({"type": "text"} when unset)
    response_schema: dict[str, Any] | None
    schema_field: str
    max_tokens: int | None  # max_output_tokens
    sampling: dict[str, float]
    metadata: dict[str, str]
    parallel_tool_calls: bool
    store: bool
    stream: bool
    body: Mapping[str, Any] = field(repr=False)
    seed: int | None = None  # the protocol has neither: the same names as chat's, for the gateway's plan
    stop: tuple[str, ...] = ()


def parse_request(body: Any) -> ResponsesRequest:
    """Validate a responses body; raises only `InvalidRequest`, naming the field as the gateway's `param`."""
    model = gen.model_of(body)
    items = _input(body.get("input"))
    tools = gen.tools(body, _tool)
    choice = gen.tool_choice(body, gen.specs(tools), "responses")
    text = gen.optional(body, "text", dict, default={})
    fmt = gen.optional(text, "format", dict, path="text.format", default={"type": "text"})
    schema, schema_field = _format(fmt)
    metadata = gen.optional(body, "metadata", dict, default={})
    if len(metadata) > MAX_METADATA_KEYS or not all(isinstance(v, str) for v in metadata.values()):
        raise InvalidRequest("metadata", f"holds at most {MAX_METADATA_KEYS} string values")
    if body.get("truncation") not in (None, *TRUNCATIONS):
        raise InvalidRequest("truncation", f"must be 'auto' or 'disabled'; got {body['truncation']!r}")
    for name, kind in (("background", bool), ("reasoning", dict), ("include", list)):
        gen.optional(body, name, kind)
    return ResponsesRequest(
        model, items, gen.optional(body, "instructions", str), gen.optional(body, "previous_response_id", str),
        tools, choice, fmt, schema, schema_field, gen.count(body, "max_output_tokens"),
        gen.sampling(body, "responses"), dict(metadata),
        gen.optional(body, "parallel_tool_calls", bool, default=True), gen.optional(body, "store", bool, default=True),
        bool(gen.optional(body, "stream", bool)), body)


def _input(value: Any) -> str | list[Mapping[str, Any]]:
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("input", "must not be empty")
        return value
    if value is None or isinstance(value, Mapping | bytes | bytearray) or not isinstance(value, Sequence):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidRequest("input", f"required: text, or a non-empty array of input items; got {got}")
    items = gen.object_list({"input": value}, "input", "text, or a non-empty array of input items")
    return [_item(item, f"input[{i}]") for i, item in enumerate(items)]


def _item(item: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise InvalidRequest(f"{where}.type", "required: an input item needs a `type` or a `role`")
    if kind == "message":
        gen.role(item, where, ROLES)
        gen.content(item.get("content"), f"{where}.content", _PARTS)
    elif kind == "function_call":
        for name in ("call_id", "name", "arguments"):
            gen.required(item, name, str, path=f"{where}.{name}")
    elif kind == "function_call_output":
        gen.required(item, "call_id", str, path=f"{where}.call_id", hint="the call_id of the call it answers")
        gen.content(item.get("output"), f"{where}.output", _OUTPUT_PARTS)
    elif kind == "item_reference":
        gen.required(item, "id", str, path=f"{where}.id")
    return {**item, "type": kind}


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    kind = gen.required(tool, "type", str, path=f"{where}.type", hint="'function' for a function tool")
    if kind != "function":
        return None  # web_search, file_search, mcp ...: the gateway says whether it has them
    if "function" in tool:
        raise InvalidRequest(f"{where}.function", "responses tools are flat: name and parameters sit on the "
                                                  "tool itself")
    return parse_tool(tool, where)


def _format(fmt: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    kind = fmt.get("type")
    if kind == "text":
        return None, ""
    if kind == "json_object":
        return {"type": "object"}, "text.format"
    if kind == "json_schema":
        gen.required(fmt, "name", str, path="text.format.name")
        schema = gen.required(fmt, "schema", dict, path="text.format.schema")
        return gen.json_schema(schema, "text.format.schema"), "text.format.schema"
    raise InvalidRequest("text.format.type", f"must be text, json_object or json_schema; got {kind!r}")


# --- typed results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item(Kept):
    """What every output item carries: its id, and its status (in_progress, completed, incomplete, ...)."""

    id: str | None
    status: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class MessageItem(Item):
    role: str | None
    content: list[Mapping[str, Any]]
    type: str = "message"

    @property
    def text(self) -> str:
        return _joined(self.content, "output_text")

    @property
    def refusal(self) -> str | None:
        """The refusal parts' text; None when the model did not refuse."""
        refused = any(p.get("type") == "refusal" for p in self.content)
        return _joined(self.content, "refusal", "refusal") if refused else None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> MessageItem:
        return cls(data.get("id"), data.get("role"), _parts(data, "content"), status=data.get("status"),
                   raw=dict(data))


def _parts(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return [p for p in data.get(key) or () if isinstance(p, Mapping)]


def _joined(parts: Sequence[Mapping[str, Any]], kind: str | None = None, key: str = "text") -> str:
    """The text of the parts of one `kind` (every part when None), joined."""
    return "".join(p.get(key) or "" for p in parts if kind is None or p.get("type") == kind)


@dataclass(frozen=True, slots=True)
class FunctionCall(Call):
    """A function call item (`id` is the item's; see Call); answer with a function_call_output of `call_id`."""

    call_id: str | None = None
    type: str = "function_call"
    status: str | None = field(default=None, kw_only=True)

    def output(self, output: str) -> dict[str, Any]:
        """The input item answering this call."""
        return {"type": "function_call_output", "call_id": self.call_id, "output": output}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> FunctionCall:
        return cls(data.get("id"), data.get("name"), data.get("arguments") or "", data.get("call_id"),
                   status=data.get("status"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class ReasoningItem(Item):
    summary: list[Mapping[str, Any]]
    type: str = "reasoning"

    @property
    def text(self) -> str:
        """The summary's text (the reasoning itself is not sent)."""
        return _joined(self.summary)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ReasoningItem:
        return cls(data.get("id"), _parts(data, "summary"), status=data.get("status"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class WebSearchCall(Item):
    action: Mapping[str, Any] = field(default_factory=dict)
    type: str = "web_search_call"

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> WebSearchCall:
        action = got if isinstance(got := data.get("action"), Mapping) else {}
        return cls(data.get("id"), dict(action), status=data.get("status"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class UnknownItem(Kept):
    """An output item of a type this version does not know: kept whole in `raw`."""

    type: str
    id: str | None = None


OutputItem = MessageItem | FunctionCall | ReasoningItem | WebSearchCall | UnknownItem

_ITEM_TYPES: dict[str, Callable[[Mapping[str, Any]], OutputItem]] = {
    "message": MessageItem.from_wire,
    "function_call": FunctionCall.from_wire,
    "reasoning": ReasoningItem.from_wire,
    "web_search_call": WebSearchCall.from_wire,
}


def parse_item(data: Any) -> OutputItem:
    """One output item, typed by its `type`; unknown types (and non-objects) kept as UnknownItem."""
    return ans.by_type(data, _ITEM_TYPES, lambda kind, raw: UnknownItem(kind, raw.get("id"), raw=raw))


@dataclass(frozen=True, slots=True)
class Response(Reply, Answer):
    """A response object: typed output items, usage, status; everything else in `raw`. Its `text` is the
    text of every message item, in output order (the SDK's `output_text`)."""

    ITEMS, TEXT_ITEM, CALL_ITEM = "output", MessageItem, FunctionCall

    status: str | None
    output: list[OutputItem]
    error: Mapping[str, Any] | None = None
    incomplete_details: Mapping[str, Any] | None = None
    previous_response_id: str | None = None

    output_text = Answer.text

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py): `incomplete` says whether a cap or a filter."""
        refused = any(item.refusal is not None for item in self.output if isinstance(item, MessageItem))
        return responses_ending(self.status, self.incomplete_details, refused=refused)

    @classmethod
    def from_wire(cls, data: Any, request_id: str | None = None) -> Response:
        data = data if isinstance(data, Mapping) else {}
        output = [parse_item(item) for item in data.get("output") or ()]
        return cls(data.get("id"), data.get("model"), data.get("status"), output, ans.mapping(data.get("error")),
                   ans.mapping(data.get("incomplete_details")), data.get("previous_response_id"),
                   usage=Usage.from_wire(data.get("usage")), request_id=request_id, raw=dict(data))

    def __repr__(self) -> str:
        return ans.summary("Response", id=self.id, status=self.status, model=self.model,
                       output=[item.type for item in self.output], text=self.text, usage=self.usage)

    def _repr_html_(self) -> str:
        caption = f"{self.id or '?'} · {self.status} · {self.model or '?'} · {ans.usage_text(self.usage)}"
        return ans.items_table(caption, self.request_id, "type", self.output)


def parse_response(data: Any, request_id: str | None = None) -> Response:
    return Response.from_wire(data, request_id)


# --- streaming -----------------------------------------------------------------------------------

# the SDK 3.54 union (protocols.md §3.5); anything else becomes UnknownEvent
EVENT_TYPES = frozenset({
    "response.created", "response.in_progress", "response.queued", "response.completed",
    "response.incomplete", "response.failed", "error",
    "response.output_item.added", "response.output_item.done",
    "response.content_part.added", "response.content_part.done",
    "response.output_text.delta", "response.output_text.done", "response.output_text.annotation.added",
    "response.refusal.delta", "response.refusal.done",
    "response.function_call_arguments.delta", "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
    "response.reasoning_text.delta", "response.reasoning_text.done",
    *(f"response.{tool}.{phase}" for tool, phases in {
        "web_search_call": ("in_progress", "searching", "completed"),
        "file_search_call": ("in_progress", "searching", "completed"),
        "code_interpreter_call": ("in_progress", "interpreting", "completed"),
        "code_interpreter_call_code": ("delta", "done"),
        "image_generation_call": ("in_progress", "generating", "completed", "partial_image"),
        "mcp_call": ("in_progress", "completed", "failed"),
        "mcp_call_arguments": ("delta", "done"),
        "mcp_list_tools": ("in_progress", "completed", "failed"),
        "compaction": ("compacting",),
        "shell_call_command": ("added", "delta", "done"),
        "shell_call_output_content": ("delta", "done"),
    }.items() for phase in phases),
    "response.audio.delta", "response.audio.done",
    "response.audio.transcript.delta", "response.audio.transcript.done",
})
TERMINAL_EVENTS = {"response.completed": "completed", "response.failed": "failed",
                   "response.incomplete": "incomplete", "error": "error"}


@dataclass(frozen=True, slots=True)
class ResponseEvent(Kept):
    """A known stream event; the addressing fields typed, the whole payload in `raw`."""

    type: str
    sequence_number: int | None = None
    output_index: int | None = None
    content_index: int | None = None
    item_id: str | None = None
    delta: Any = None

    @property
    def text(self) -> str:
        """Answer text this event adds (only `response.output_text.delta` adds any)."""
        return self.delta if self.type == "response.output_text.delta" and isinstance(self.delta, str) else ""

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ResponseEvent:
        return cls(data["type"], ans.integer(data.get("sequence_number")), ans.integer(data.get("output_index")),
                   ans.integer(data.get("content_index")), data.get("item_id"), data.get("delta"), raw=data)


class ResponsesAccumulator(Accumulated):
    """Assembles a responses stream. Events repeating a `sequence_number` already applied are
    skipped (counted in `duplicates`), so a replayed event cannot double text."""

    def __init__(self) -> None:
        self.events: list[ResponseEvent | UnknownEvent] = []
        self.status = "in_progress"  # completed | failed | incomplete | error once a terminal event arrives
        self.error: Mapping[str, Any] | None = None
        self.duplicates = 0
        self._snapshot: dict[str, Any] = {}
        self._final: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._texts: dict[tuple[int, int], list[str]] = {}
        self._args: dict[int, list[str]] = {}
        self._seen: set[int] = set()
        self._index_of: dict[str, int] = {}  # item_id -> output_index, for events that carry only the id

    def add(self, event: Event) -> list[ResponseEvent | UnknownEvent]:
        data = ans.typed_payload(event, EVENT_TYPES, self.events)
        if isinstance(data, UnknownEvent):
            return [data]
        typed = ResponseEvent.from_wire(data)
        seq = typed.sequence_number
        if seq is not None:
            if seq in self._seen:
                self.duplicates += 1
                return []
            self._seen.add(seq)
        return self._dispatch(typed, data)

    @ans.handles("response.created", "response.in_progress", "response.queued")
    def _on_lifecycle(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        response = data.get("response")
        if isinstance(response, Mapping):
            self._snapshot = dict(response)

    @ans.handles(*TERMINAL_EVENTS)
    def _on_terminal(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        self._on_lifecycle(event, data)
        self.status = TERMINAL_EVENTS[event.type]
        if event.type != "error":
            self._final = self._snapshot
        if event.type == "response.failed":
            self.error = ans.mapping(self._snapshot.get("error")) or {"message": "response.failed"}
        elif event.type == "error":
            self.error = {k: data.get(k) for k in ("code", "message", "param") if k in data}

    @ans.handles("response.output_item.added", "response.output_item.done")
    def _on_item(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        item = data.get("item")
        index = event.output_index
        if not isinstance(item, Mapping) or index is None:
            return
        self._items[index] = dict(item)
        if isinstance(item.get("id"), str):
            self._index_of[item["id"]] = index
        if event.type.endswith(".done"):  # the final snapshot wins over what the deltas built
            for ci, part in enumerate(item.get("content") or ()):
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    self._texts[(index, ci)] = [part.get("text") or ""]
            if item.get("type") == "function_call":
                self._args[index] = [item.get("arguments") or ""]

    def _index(self, event: ResponseEvent) -> int | None:
        if event.output_index is not None:
            return event.output_index
        return self._index_of.get(event.item_id) if event.item_id else None

    @ans.handles("response.output_text.delta")
    def _on_text_delta(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        index = self._index(event)
        if index is not None and isinstance(event.delta, str):
            self._texts.setdefault((index, event.content_index or 0), []).append(event.delta)

    @ans.handles("response.output_text.done")
    def _on_text_done(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        index = self._index(event)
        if index is not None and isinstance(data.get("text"), str):
            self._texts[(index, event.content_index or 0)] = [data["text"]]

    @ans.handles("response.function_call_arguments.delta")
    def _on_args_delta(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        index = self._index(event)
        if index is not None and isinstance(event.delta, str):
            self._args.setdefault(index, []).append(event.delta)

    @ans.handles("response.function_call_arguments.done")
    def _on_args_done(self, event: ResponseEvent, data: Mapping[str, Any]) -> None:
        index = self._index(event)
        if index is not None and isinstance(data.get("arguments"), str):
            self._args[index] = [data["arguments"]]

    @property
    def text(self) -> str:
        if self._final is not None and self._final.get("output"):
            return self.result().text
        return "".join("".join(self._texts[key]) for key in sorted(self._texts)
                       if self._items.get(key[0], {}).get("type", "message") == "message")

    @property
    def tool_calls(self) -> list[FunctionCall]:
        return self.result().tool_calls

    @property
    def usage(self) -> Usage | None:
        return Usage.from_wire((self._final or self._snapshot).get("usage"))

    def result(self) -> Response:
        """The response as far as it arrived: the terminal snapshot, or one assembled from the items."""
        body = dict(self._final if self._final is not None else self._snapshot)
        if not body.get("output"):
            body["output"] = [self._assembled(i) for i in sorted(self._items)]
        body["status"] = self.status if self.status != "error" else body.get("status", "failed")
        if self.status == "error" and self.error:
            body.setdefault("error", dict(self.error))
        return Response.from_wire(body)

    def _assembled(self, index: int) -> dict[str, Any]:
        item = dict(self._items[index])
        if item.get("type") == "message":
            content = [dict(p) for p in item.get("content") or () if isinstance(p, Mapping)]
            for (oi, ci), pieces in sorted(self._texts.items()):
                if oi != index:
                    continue
                while len(content) <= ci:
                    content.append({"type": "output_text", "text": "", "annotations": []})
                content[ci]["text"] = "".join(pieces)
            item["content"] = content
        elif item.get("type") == "function_call" and index in self._args:
            item["arguments"] = "".join(self._args[index])
        return item


