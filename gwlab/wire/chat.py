"""Chat completions (protocols.md §2): the request body, the typed result, the stream accumulator.

Strict writer: `build_request` refuses what the gateway would refuse, naming the field, and omits
every optional parameter left at None. Tolerant reader: every result keeps the body it came from in
`raw`; a stream keeps every chunk. The accumulator is pure (SSE events in, state out), so the client
stream and any replay of recorded bytes assemble answers the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gwlab.errors import InvalidRequest
from gwlab.wire import _answers as ans
from gwlab.wire import generation as gen
from gwlab.wire._answers import Accumulated, Call, Kept, Reply
from gwlab.wire._answers import Usage as TokenUsage
from gwlab.wire.endings import chat_ending
from gwlab.wire.sse import Event, UnknownEvent
from gwlab.wire.tools import ToolSpec, parse_tool

__all__ = [
    "ChatAccumulator",
    "ChatChunk",
    "ChatCompletion",
    "ChatMessage",
    "ChatRequest",
    "Choice",
    "ToolCall",
    "Usage",
    "build_request",
    "parse_request",
    "parse_response",
]

DONE = "[DONE]"
# how a request caps its output: the spec's name first, then the older one that llama.cpp, LiteLLM and
# most OpenAI-compatible servers read; gwlab may send both with one value (client.dialect)
TOKEN_CAP_FIELDS = ("max_completion_tokens", "max_tokens")
ROLES = ("system", "developer", "user", "assistant", "tool")


# --- the request ---------------------------------------------------------------------------------


def build_request(messages: str | Sequence[Mapping[str, Any]], *, model: str, stream: bool = False,
                  **params: Any) -> dict[str, Any]:
    """The JSON body of `POST /chat/completions`; a bare string is one user message.

    A stream asks for the usage chunk (`stream_options.include_usage`) unless the caller set
    `stream_options`, so the ledger can count tokens of streamed calls too. The body is checked by
    `parse_request`, the validator the local gateway runs, before it leaves.
    """
    options = params.get("stream_options")
    options = (options if options is not None else {"include_usage": True}) if stream else None
    fields = {"model": model, "messages": gen.turns(messages)}
    return gen.build(parse_request, fields, {**params, "stream_options": options}, stream)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat body the validator accepted: what a gateway needs, typed; the whole body in `body`."""

    model: str
    messages: list[Mapping[str, Any]]
    tools: list[gen.Tool]  # function tools as ToolSpec; other types kept as sent
    tool_choice: gen.ToolChoice
    response_schema: dict[str, Any] | None  # structured output; `schema_field` says where it sat
    schema_field: str
    max_tokens: int | None
    sampling: dict[str, float]
    seed: int | None
    stop: tuple[str, ...]
    n: int
    stream: bool
    include_usage: bool
    body: Mapping[str, Any] = field(repr=False)
    # logprobs: true asks each answer token's logprob, with this many alternatives (0-20); None: not asked
    top_logprobs: int | None = None


def parse_request(body: Any) -> ChatRequest:
    """Validate a chat body; raises only `InvalidRequest`, naming the field as the gateway's `param`."""
    model = gen.model_of(body)
    messages = gen.object_list(body, "messages", "a non-empty array of {role, content} objects")
    for i, message in enumerate(messages):
        _message(message, f"messages[{i}]")
    tools = gen.tools(body, _tool, "function.name")
    choice = gen.tool_choice(body, gen.specs(tools), "chat")
    schema, schema_field = _response_format(gen.optional(body, "response_format", dict))
    limit, legacy = gen.count(body, "max_completion_tokens"), gen.count(body, "max_tokens")
    conflict = cap_conflict(body)
    if conflict:
        raise InvalidRequest("max_tokens", conflict)
    sampling = gen.sampling(body, "chat")
    seed = gen.optional(body, "seed", int)
    stop = gen.stop(body, "stop")
    gen.optional(body, "parallel_tool_calls", bool)
    top_logprobs = _logprobs(body)
    gen.optional(body, "web_search_options", dict)
    n = gen.count(body, "n") or 1
    stream = bool(gen.optional(body, "stream", bool))
    options = gen.optional(body, "stream_options", dict)
    if options is not None and not stream:
        raise InvalidRequest("stream_options", "only allowed with stream: true")
    include_usage = bool(gen.optional(options or {}, "include_usage", bool, path="stream_options.include_usage"))
    return ChatRequest(model, list(messages), tools, choice, schema, schema_field, limit or legacy, sampling,
                       seed, stop, n, stream, include_usage, body, top_logprobs)


MAX_TOP_LOGPROBS = 20  # the official schema's bound


def _logprobs(body: Mapping[str, Any]) -> int | None:
    """How many alternatives per token when `logprobs` is true (0 unless `top_logprobs` says), else None;
    `top_logprobs` without `logprobs: true` is refused, as the hosted API does."""
    asked = gen.optional(body, "logprobs", bool)
    top = gen.count(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not asked:
        raise InvalidRequest("top_logprobs", "requires logprobs: true")
    return (top or 0) if asked else None


def cap_conflict(body: Mapping[str, Any]) -> str | None:
    """Why the two cap fields disagree, or None. Both with one value is fine (gwlab itself sends
    that); two values would leave the cap to whichever field the server happens to read."""
    first, second = (body.get(name) for name in TOKEN_CAP_FIELDS)
    if first is None or second is None or first == second:
        return None
    return (f"differs from max_completion_tokens ({second} vs {first}): they are two names for one "
            f"output cap; pass one (gwlab sends it under both names)")


_TEXT_PARTS = {"text": "text"}
_ASSISTANT_PARTS = {"text": "text", "refusal": "refusal"}


def _message(message: Mapping[str, Any], where: str) -> None:
    role = gen.role(message, where, ROLES)
    if role == "tool":
        gen.required(message, "tool_call_id", str, path=f"{where}.tool_call_id",
                     hint="the id of the tool call it answers")
    if role != "assistant":
        gen.content(message.get("content"), f"{where}.content", _TEXT_PARTS)
        return
    calls = gen.optional(message, "tool_calls", list, path=f"{where}.tool_calls", default=[])
    for j, call in enumerate(calls):
        _tool_call(call, f"{where}.tool_calls[{j}]")
    if message.get("content") is None and not calls:
        raise InvalidRequest(f"{where}.content", "required unless 'tool_calls' is given")
    if message.get("content") is not None:
        gen.content(message["content"], f"{where}.content", _ASSISTANT_PARTS)


def _tool_call(call: Any, at: str) -> None:
    if not isinstance(call, Mapping):
        raise InvalidRequest(at, f"must be an object; got {type(call).__name__}")
    if call.get("type", "function") != "function":
        raise InvalidRequest(f"{at}.type", f"must be 'function'; got {call.get('type')!r}")
    function = gen.required(call, "function", dict, path=f"{at}.function", hint="{name, arguments}")
    gen.required(call, "id", str, path=f"{at}.id")
    gen.required(function, "name", str, path=f"{at}.function.name")
    gen.optional(function, "arguments", str, path=f"{at}.function.arguments")


def _tool(tool: Mapping[str, Any], where: str) -> ToolSpec | None:
    kind = gen.required(tool, "type", str, path=f"{where}.type", hint="'function' for a function tool")
    if kind != "function":
        return None  # custom tools are the protocol's too; the gateway says whether it has them
    if "function" not in tool:
        raise InvalidRequest(f"{where}.function.name", "required: chat tools nest name and parameters "
                                                       "under `function`")
    return parse_tool(tool, where)


def _response_format(fmt: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    kind = None if fmt is None else fmt.get("type")
    if kind in (None, "text"):
        return None, ""
    if kind == "json_object":
        return {"type": "object"}, "response_format"
    if kind == "json_schema":
        spec = gen.required(fmt or {}, "json_schema", dict, path="response_format.json_schema")
        gen.required(spec, "name", str, path="response_format.json_schema.name")
        where = "response_format.json_schema.schema"
        return gen.json_schema(spec.get("schema", {"type": "object"}), where), where
    raise InvalidRequest("response_format.type", f"must be text, json_object or json_schema; got {kind!r}")


# --- typed results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage(TokenUsage):
    """Chat token counts: `prompt_tokens`/`completion_tokens` on the wire, input/output for the ledger."""

    WIRE_NAMES: ClassVar[tuple[str, str, str]] = ("prompt_tokens", "completion_tokens", "total_tokens")

    @property
    def prompt_tokens(self) -> int | None:
        return self.input_tokens

    @property
    def completion_tokens(self) -> int | None:
        return self.output_tokens


@dataclass(frozen=True, slots=True)
class ToolCall(Call):
    """A function call the model asks for (`id`, `name`, `arguments`: see Call)."""

    type: str = "function"

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ToolCall:
        function = got if isinstance(got := data.get("function"), Mapping) else {}
        return cls(data.get("id"), function.get("name"), function.get("arguments") or "",
                   data.get("type") or "function", raw=dict(data))


@dataclass(frozen=True, slots=True)
class ChatMessage(Kept):
    """The assistant message of one choice."""

    role: str | None
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    refusal: str | None = None

    @classmethod
    def from_wire(cls, data: Any) -> ChatMessage:
        data = data if isinstance(data, Mapping) else {}
        content = data.get("content")
        if isinstance(content, list):  # content parts: keep the text ones as the text
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        calls = [ToolCall.from_wire(c) for c in data.get("tool_calls") or () if isinstance(c, Mapping)]
        return cls(data.get("role"), content, calls, data.get("refusal"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class Choice(Kept):
    index: int
    message: ChatMessage
    finish_reason: str | None = None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], position: int) -> Choice:
        index = data.get("index")
        return cls(index if isinstance(index, int) else position, ChatMessage.from_wire(data.get("message")),
                   data.get("finish_reason"), raw=dict(data))


@dataclass(frozen=True, slots=True)
class ChatCompletion(Reply):
    """A chat completion: typed choices and usage; everything the gateway sent stays in `raw`."""

    choices: list[Choice]
    created: int | float | None = None

    @property
    def text(self) -> str:
        """The first choice's text ("" when it has none, e.g. a tool call)."""
        return (self.choices[0].message.content or "") if self.choices else ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.choices[0].message.tool_calls if self.choices else []

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None

    @property
    def ending(self) -> str:
        """How the answer ended (gwlab/wire/endings.py): a choice without a finish_reason never ended."""
        return chat_ending((c.finish_reason for c in self.choices),
                           refused=any(c.message.refusal for c in self.choices))

    @classmethod
    def from_wire(cls, data: Any, request_id: str | None = None) -> ChatCompletion:
        data = data if isinstance(data, Mapping) else {}
        choices = [Choice.from_wire(c, i) for i, c in enumerate(data.get("choices") or ())
                   if isinstance(c, Mapping)]
        return cls(data.get("id"), data.get("model"), choices, data.get("created"),
                   usage=Usage.from_wire(data.get("usage")), request_id=request_id, raw=dict(data))

    def __repr__(self) -> str:
        return ans.summary("ChatCompletion", model=self.model, text=self.text,
                       tool_calls=[c.name for c in self.tool_calls], finish_reason=self.finish_reason,
                       usage=self.usage)

    def _repr_html_(self) -> str:
        caption = f"{self.model or '?'} · {ans.usage_text(self.usage)}"
        return ans.table(caption, self.request_id, ("#", "finish", "message"),
                         ((c.index, c.finish_reason, _shown(c.message)) for c in self.choices))


def _shown(message: ChatMessage) -> str:
    calls = [ans.shown(call) for call in message.tool_calls]
    return "\n".join([message.content or "", *calls]).strip()


def parse_response(data: Any, request_id: str | None = None) -> ChatCompletion:
    """The typed result of a non-streaming chat completion body."""
    return ChatCompletion.from_wire(data, request_id)


# --- streaming -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatChunk(Kept):
    """One `chat.completion.chunk`; `text` is what it adds to choice 0."""

    id: str | None
    choices: list[Mapping[str, Any]]
    usage: Usage | None = None

    @property
    def text(self) -> str:
        for choice in self.choices:
            if choice.get("index", 0) == 0:
                delta = choice.get("delta")
                return (delta.get("content") or "") if isinstance(delta, Mapping) else ""
        return ""


class _ChoiceState:
    __slots__ = ("calls", "content", "finish_reason", "refusal", "role")

    def __init__(self) -> None:
        self.role: str | None = None
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.finish_reason: str | None = None
        self.calls: dict[int, dict[str, Any]] = {}  # tool_calls[].index -> {id, type, name, arguments[]}


class ChatAccumulator(Accumulated):
    """Assembles a chat stream: content per choice, tool-call fragments by their `index`, the usage
    chunk (empty `choices`). An `error` payload sets `error`.

    The stream has ended at `[DONE]`, but it is `completed` only if by then at least one choice
    arrived and every choice carried a finish_reason. llama-cpp-python's server ends a running stream
    with a bare `[DONE]` when another request arrives: that answer was cut, so its status is
    `interrupted`, exactly as if the connection had dropped."""

    def __init__(self) -> None:
        self.events: list[ChatChunk | UnknownEvent] = []
        self.done = False  # `[DONE]` arrived
        self.usage: Usage | None = None
        self.error: Mapping[str, Any] | None = None
        self._choices: dict[int, _ChoiceState] = {}
        self._head: dict[str, Any] = {}

    @property
    def status(self) -> str:
        """in_progress | completed | interrupted (`[DONE]` before every finish_reason) | error."""
        finished = bool(self._choices) and all(state.finish_reason for state in self._choices.values())
        return ans.stream_status(self.error, self.done, finished)

    def add(self, event: Event) -> list[ChatChunk | UnknownEvent]:
        """Take one SSE event; return the typed events it produced (none for `[DONE]`)."""
        if event.data.startswith(DONE):
            self.done = True
            return []
        chunk = ans.payload(event, self.events)
        if isinstance(chunk, UnknownEvent):
            return [chunk]
        if "error" in chunk and "choices" not in chunk:
            error = chunk["error"]
            self.error = error if isinstance(error, Mapping) else {"message": str(error)}
            return [ans.kept(self.events, UnknownEvent("error", chunk))]
        if not self._head:
            self._head = {k: chunk.get(k) for k in ("id", "model", "created", "system_fingerprint")}
        choices = chunk.get("choices") or []
        for choice in choices:
            self._apply(choice)
        usage = Usage.from_wire(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        typed = ChatChunk(chunk.get("id"), choices, usage, raw=chunk)
        self.events.append(typed)
        return [typed]

    def _apply(self, choice: Mapping[str, Any]) -> None:
        index = choice.get("index", 0)
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceState()
        delta = choice.get("delta") or {}
        if delta.get("role"):
            state.role = delta["role"]
        if delta.get("content"):
            state.content.append(delta["content"])
        if delta.get("refusal"):
            state.refusal.append(delta["refusal"])
        for fragment in delta.get("tool_calls") or ():
            position = fragment.get("index", len(state.calls))
            call = state.calls.get(position)
            if call is None:
                call = state.calls[position] = {"id": None, "type": "function", "name": None, "arguments": []}
            if fragment.get("id"):
                call["id"] = fragment["id"]
            if fragment.get("type"):
                call["type"] = fragment["type"]
            function = fragment.get("function") or {}
            if function.get("name"):
                call["name"] = function["name"]
            if function.get("arguments"):
                call["arguments"].append(function["arguments"])
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]

    @property
    def text(self) -> str:
        state = self._choices.get(0)
        return "".join(state.content) if state else ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        state = self._choices.get(0)
        return _calls(state) if state else []

    def result(self) -> ChatCompletion:
        """The completion assembled so far, in the non-streaming shape (partial unless `complete`)."""
        choices = []
        for index in sorted(self._choices):
            state = self._choices[index]
            message: dict[str, Any] = {"role": state.role or "assistant", "content": "".join(state.content)}
            if state.refusal:
                message["refusal"] = "".join(state.refusal)
            calls = _calls(state)
            if calls:
                message["tool_calls"] = [dict(c.raw) for c in calls]
                if not state.content:
                    message["content"] = None
            choices.append({"index": index, "message": message, "finish_reason": state.finish_reason})
        body = {**self._head, "object": "chat.completion", "choices": choices,
                "usage": dict(self.usage.raw) if self.usage else None}
        return ChatCompletion.from_wire(body)


def _calls(state: _ChoiceState) -> list[ToolCall]:
    out = []
    for position in sorted(state.calls):
        call = state.calls[position]
        wire = {"id": call["id"], "type": call["type"],
                "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
        out.append(ToolCall.from_wire(wire))
    return out
