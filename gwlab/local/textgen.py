"""Text and tool calls from the local text model, shared by the chat, responses and messages routes.

Each route turns its protocol's input into one `Conversation` (system text plus user, assistant and tool
turns) and its options into a `Plan`; `generate` runs the engine in a worker thread and yields `Started`,
then `Text` pieces or one `CallStarted` with its `CallArguments`, and a final `Finished`, which the route
renders in its own wire shape. Tool calls and structured output are produced under a JSON-schema grammar,
so what the caller receives parses and validates against the schema it sent (checked with jsonschema).
Usage is the text model's real token counts; the routing decision's embedding tokens are not in it.

With `tool_choice` auto the decision engine routes (see `_route`): one choice question asks whether the
last user message is best served by answering directly or by one of the tools, each option described by
its tool's name and description.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import dataclasses
import json
import logging
import secrets
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from gwlab.local.engines.base import Completion, GenerationRequest, GenerationUsage, Question, TokenLogprob
from gwlab.local.errors import APIError
from gwlab.local.limits import Limits
from gwlab.local.streaming import iterate_in_thread
from gwlab.wire.generation import Tool, ToolChoice
from gwlab.wire.generation import named_choice as named_choice  # the realtime session's tool choice, too
from gwlab.wire.tools import ToolSpec

log = logging.getLogger("gwlab.local")

DEFAULT_MAX_TOKENS = 256  # when the caller sets no limit: a base model left alone tends to loop
DEFAULT_TEMPERATURE = 0.7
JSON_ATTEMPTS = 3  # schemas the grammar cannot fully express are generated again until one validates
STRING_CAP, ARRAY_CAP, ENUM_RANGE_CAP = 120, 8, 64
# arguments must say what the user said ("Oslo", not "O"): a 270M model sampled hot misspells them
ARGUMENTS_MAX_TEMPERATURE = 0.3

# Answering directly is described by a few prototypes rather than one sentence: embedding similarity
# compares the request with each text, and "anything without a tool" is too abstract to be near
# anything. Labels contain a space and a colon, so they can never collide with a tool name.
RESPOND_PROTOTYPES: dict[str, str] = {
    "respond: chat": "Say hello, small talk, thanks, how are you",
    "respond: write": "Write a poem, story, joke, haiku or essay",
    "respond: explain": "Explain, define or answer a general knowledge or math question",
    "respond: edit": "Translate, summarise, rewrite or correct a text",
}
# a call is an answer that begins "I will call name(" and the grammar writes the JSON arguments; history
# renders past calls the same way, then the tool's output as a "Result:" line (build_prompt)
CALL_PHRASE = "I will call {name}("


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


# --- the conversation and what to generate ------------------------------------------------------------
@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON object as text, as every protocol but Anthropic's sends it


@dataclass(slots=True)
class Turn:
    role: str  # user | assistant | tool
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None  # tool turns: the call they answer
    name: str | None = None  # tool turns: the tool that answered


@dataclass(slots=True)
class Conversation:
    system: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def add_system(self, text: str) -> None:
        if text.strip():
            self.system.append(text.strip())

    def add_user(self, text: str) -> None:
        self.turns.append(Turn("user", text))

    def add_assistant(self, text: str = "", calls: Sequence[ToolCall] = ()) -> None:
        """Consecutive assistant pieces (text, then calls) are one turn, as in every protocol's history."""
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "assistant" and (not last.calls or not text):
            last.text = f"{last.text} {text}".strip() if text else last.text
            last.calls.extend(calls)
        else:
            self.turns.append(Turn("assistant", text, list(calls)))

    def add_tool_result(self, call_id: str, text: str, name: str | None = None) -> None:
        if name is None:  # the protocols name the call, not the tool: find the call it answers
            name = next((c.name for t in self.turns for c in t.calls if c.id == call_id), None)
        self.turns.append(Turn("tool", text, call_id=call_id, name=name))


@dataclass(slots=True)
class Plan:
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    seed: int | None = None
    stop: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    choice: ToolChoice = field(default_factory=ToolChoice)
    schema: dict[str, Any] | None = None  # structured text output
    call_prefix: str = "call_"
    grammars: dict[str, str] = field(default_factory=dict)  # filled by `prepare`
    reuse_prefix: bool = False  # GenerationRequest.reuse_prefix: for conversations that grow turn by turn
    model: str = ""  # the text model's id ("" is the default text model); picks the engine
    top_logprobs: int | None = None  # GenerationRequest.top_logprobs: None asks for no log-probabilities
    choices: int = 1  # answers asked for (chat's `n`), one generation each: the token cap counts them all


# --- events --------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Started:
    """First event: the prompt is built (Anthropic's message_start reports its size up front)."""

    prompt_tokens: int


@dataclass(slots=True)
class Text:
    text: str
    # with Plan.top_logprobs: the tokens whose text ends in this piece, each cut to its part of the answer
    tokens: list[TokenLogprob] = field(default_factory=list)


@dataclass(slots=True)
class CallStarted:
    index: int
    call: ToolCall


@dataclass(slots=True)
class CallArguments:
    index: int
    text: str


@dataclass(slots=True)
class Finished:
    reason: str  # stop | length | tool_calls | stop_sequence
    usage: GenerationUsage
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    stop_sequence: str | None = None
    tokens: list[TokenLogprob] = field(default_factory=list)  # every Text's tokens: they join to `text`


Event = Started | Text | CallStarted | CallArguments | Finished


# --- what the local model refuses, and the plan, for the three routes ---------------------------------------
# A body reaching here passed its family's validator (gwlab.wire.chat, .responses, .messages); what is
# left is what the local text model cannot do, whatever the protocol allows.
def function_tools(tools: Sequence[Tool]) -> list[ToolSpec]:
    """The function tools; a tool of another type (hosted search, custom) is refused by index."""
    for i, tool in enumerate(tools):
        if not isinstance(tool, ToolSpec):
            raise APIError(400, f"'tools[{i}].type' {tool.get('type')!r} is not available on the local model "
                           "(function tools only)", param=f"tools[{i}].type")
    return [t for t in tools if isinstance(t, ToolSpec)]


def plan_for(request: Any, tools: Sequence[ToolSpec], *, model: str, call_prefix: str = "call_") -> Plan:
    """The engine settings of a validated chat, responses or messages request (they share these names)."""
    choice: ToolChoice = request.tool_choice
    if choice.mode == "hosted":
        raise APIError(400, f"'tool_choice.type' {choice.name!r}: the local model has no hosted tools",
                       param="tool_choice.type")
    plan = Plan(call_prefix=call_prefix, model=model, tools=choice.offered(tools), choice=choice,
                schema=request.response_schema, seed=request.seed, stop=request.stop)
    plan.max_tokens = request.max_tokens or plan.max_tokens
    plan.temperature = request.sampling.get("temperature", plan.temperature)
    return plan


def check_tools(body: Mapping[str, Any], limits: Limits) -> None:
    """More than `limits.max_tools` tools is a 400 naming `tools`, before any tool is read: each one is
    validated, compiled to a grammar and described to the routing model (issue 30: 3,000 took 40 s)."""
    tools = body.get("tools")
    if limits.max_tools is not None and isinstance(tools, list) and len(tools) > limits.max_tools:
        raise APIError(400, f"'tools' holds {len(tools)} tools; the gateway takes at most {limits.max_tools} "
                       "per request", param="tools")


def check_tokens(plan: Plan, limits: Limits, *, cap_field: str) -> None:
    """More than `limits.max_request_tokens` generated tokens over all choices (n x the token cap) is a 400
    before any token: naming `n` when several choices pass the cap, else the family's token cap field."""
    cap, total = limits.max_request_tokens, plan.choices * plan.max_tokens
    if cap is None or total <= cap:
        return
    if plan.choices > 1:
        raise APIError(400, f"'n' x '{cap_field}' is {plan.choices} x {plan.max_tokens} = {total} tokens; the "
                       f"gateway generates at most {cap} per request", param="n")
    raise APIError(400, f"'{cap_field}' is {plan.max_tokens}; the gateway generates at most {cap} tokens per "
                   "request", param=cap_field)


def text_of_parts(content: str | Sequence[Mapping[str, Any]], param: str, kinds: Mapping[str, str]) -> str:
    """The text of a validated string or list of typed parts; `kinds` maps the part types read to their field.

    Parts the local text model cannot read (images, audio, files) are refused by name rather than
    silently dropped, so the caller never gets an answer to a question it did not ask."""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        kind = part["type"]
        if kind not in kinds:
            raise APIError(400, f"'{param}[{j}].type' {kind!r} is not supported here; use "
                           + " or ".join(repr(k) for k in kinds), param=f"{param}[{j}].type")
        texts.append(part[kinds[kind]])
    return "\n".join(texts)


# --- JSON schemas the grammar can and cannot enforce ------------------------------------------------------
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
# keywords the llama.cpp schema converter turns into grammar rules, plus annotations
_ENFORCED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "$ref", "$defs", "definitions", "minLength", "maxLength",
    "pattern", "format", "title", "description", "default", "examples", "$schema", "$id", "$comment",
})


def _children(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in _SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            yield from (s for s in schema[key].values() if isinstance(s, dict))
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            yield from (s for s in schema[key] if isinstance(s, dict))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield schema[key]


def generation_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A stricter copy of `schema` for the grammar: whatever it allows, the original allows too.

    A base model left free inside a string or an array rambles until the token limit, so unbounded
    strings and arrays get a cap; a small integer range becomes an enum, which the grammar can force
    (it cannot force minimum/maximum)."""
    out = copy.deepcopy(dict(schema))

    def tighten(s: dict[str, Any]) -> None:
        _split_types(s)
        if s.get("type") == "string" and not {"maxLength", "pattern", "enum", "const", "format"} & s.keys():
            s["maxLength"] = max(int(s.get("minLength", 0)), 0) + STRING_CAP
        if s.get("type") == "array" and isinstance(s.get("items"), dict) and "maxItems" not in s:
            s["maxItems"] = max(int(s.get("minItems", 0)), 0) + ARRAY_CAP
        if s.get("type") == "integer" and "enum" not in s:
            low = s.get("minimum", s["exclusiveMinimum"] + 1 if "exclusiveMinimum" in s else None)
            high = s.get("maximum", s["exclusiveMaximum"] - 1 if "exclusiveMaximum" in s else None)
            if (isinstance(low, int) and isinstance(high, int) and 0 <= high - low <= ENUM_RANGE_CAP
                    and "multipleOf" not in s):
                s["enum"] = list(range(low, high + 1))
                for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                    s.pop(key, None)
        for child in _children(s):
            tighten(child)

    tighten(out)
    return out


_OF_TYPE = {"null": lambda v: v is None, "boolean": lambda v: isinstance(v, bool),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "string": lambda v: isinstance(v, str), "array": lambda v: isinstance(v, list),
            "object": lambda v: isinstance(v, dict)}


def _split_types(s: dict[str, Any]) -> None:
    """A type list (a nullable field: `{"type": ["string", "null"], "enum": [...]}`), in place, as anyOf
    one schema per type: the converter drops a type list's other keywords, so its enum went unforced (the
    check then failed every attempt), and a string branch gets its cap here only once it stands alone."""
    kinds = s.get("type")
    if not isinstance(kinds, list) or len(kinds) < 2 or not set(kinds) <= _OF_TYPE.keys() or "anyOf" in s:
        return
    rest = {k: v for k, v in s.items() if k != "type"}
    branches = []
    for kind in kinds:
        branch = {"type": "null"} if kind == "null" else {**rest, "type": kind}
        if "enum" in rest:
            branch = {**branch, "enum": [v for v in rest["enum"] if _OF_TYPE[kind](v)]}
            if not branch["enum"]:
                continue
        branches.append(branch)
    s.clear()
    s["anyOf"] = branches


def enforced(schema: dict[str, Any]) -> bool:
    """Whether the grammar alone guarantees validity (else output is checked and generated again)."""
    if not _ENFORCED.issuperset(schema):
        return False
    if isinstance(schema.get("type"), list) and len(schema) > 1:  # the converter drops the other keywords
        return False
    if "pattern" in schema and {"minLength", "maxLength"} & schema.keys():
        return False
    return all(enforced(child) for child in _children(schema))


def valid_json(text: str, schema: Mapping[str, Any]) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    import jsonschema

    valid: bool = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    return valid


# --- preparing and running ----------------------------------------------------------------------------------
def _engines(plan: Plan) -> tuple[Any, Any]:
    from gwlab.local.engines import get_decider, get_generator

    return get_generator(plan.model or None), get_decider()


def prepare_sync(plan: Plan, params: Mapping[str, str]) -> None:
    """Compile every grammar the plan may need, so an unusable schema is a 400 before any output.

    `params` names where each schema sat in the request ("" for the output schema, else tool names)."""
    generator, _ = _engines(plan)
    schemas = {t.name: t.parameters for t in plan.tools}
    if plan.schema is not None:
        schemas[""] = plan.schema
    for key, schema in schemas.items():
        try:
            plan.grammars[key] = generator.json_grammar(generation_schema(schema))
        except Exception as exc:
            param = params.get(key, "tools")
            raise APIError(400, f"'{param}' uses JSON Schema features the local model cannot follow: {exc}",
                           param=param) from None


def check_context(conversation: Conversation, plan: Plan, param: str) -> None:
    """A prompt over the text model's `max_input_tokens` is a 400 naming the input field (`param`) and the
    limit, before any stream opens: it used to reach the engine and come back as a 500, or as a 200 stream
    holding an error event (docs/gateway.md, Input limits)."""
    generator, _ = _engines(plan)
    limit = getattr(generator, "max_input_tokens", None)
    if limit is None:
        return
    tokens = generator.count_tokens(_prompt(generator, conversation, plan, None))
    if tokens > limit:
        raise APIError(400, f"'{param}' makes a prompt of {tokens} tokens; {generator.model_id} reads at most "
                       f"{limit} (its context, shared with the answer): shorten it or split it",
                       param=param, code="context_length_exceeded")


async def prepare(plan: Plan, params: Mapping[str, str], conversation: Conversation | None = None,
                  input_param: str = "messages") -> None:
    """`prepare_sync`, and with a conversation also `check_context`, in a worker thread."""
    await run_in_threadpool(prepare_sync, plan, params)
    if conversation is not None:
        await run_in_threadpool(check_context, conversation, plan, input_param)


def generate(conversation: Conversation, plan: Plan) -> AsyncIterator[Event]:
    """Events of one answer; the engine runs in a worker thread and stops if the consumer goes away."""
    return iterate_in_thread(lambda stop: _run(conversation, plan, stop))


async def complete(conversation: Conversation, plan: Plan) -> Finished:
    async for event in generate(conversation, plan):
        if isinstance(event, Finished):
            return event
    raise RuntimeError("the generator ended without a finish event")  # pragma: no cover


def _run(conversation: Conversation, plan: Plan, stop: threading.Event) -> Iterator[Event]:
    generator, decider = _engines(plan)
    usage = GenerationUsage()
    tool = _route(conversation, plan, decider)
    prompt = _prompt(generator, conversation, plan, tool)
    yield Started(generator.count_tokens(prompt))
    if tool is None:
        text, scored = [], []
        end: tuple[str, str | None] = ("stop", None)
        prefill = bool(conversation.turns) and conversation.turns[-1].role == "assistant"
        for piece, reason, sequence, tokens in _pieces(generator, prompt, plan, usage, plan.grammars.get(""),
                                                       plan.schema, lstrip=not prefill):
            if piece or tokens:
                text.append(piece)
                scored.extend(tokens)
                yield Text(piece, tokens)
            end = (reason, sequence) if reason else end
        yield Finished(end[0], usage, "".join(text), stop_sequence=end[1], tokens=scored)
        return
    call = ToolCall(new_id(plan.call_prefix), tool.name, "")
    yield CallStarted(0, call)
    arguments, finish = [], "tool_calls"
    cool = dataclasses.replace(plan, temperature=min(plan.temperature, ARGUMENTS_MAX_TEMPERATURE))
    for piece, reason, _, _ in _pieces(generator, prompt, cool, usage, plan.grammars[tool.name],
                                       tool.parameters, stops=()):
        if piece:
            arguments.append(piece)
            yield CallArguments(0, piece)
        finish = "length" if reason == "length" else finish
    call.arguments = "".join(arguments)
    yield Finished(finish, usage, calls=[call])


def _route(conversation: Conversation, plan: Plan, decider: Any) -> ToolSpec | None:
    """The tool to call, or None to answer in text.

    none (or no tools): text. A named tool: that tool. required: the only tool, or the decision engine's
    pick among the tools. auto: text right after a tool result (the model reports what the tool said
    instead of calling again), else the decision engine's pick between answering directly (described by
    RESPOND_PROTOTYPES) and each tool (described by its name and description), asked about the last
    user message."""
    tools = {t.name: t for t in plan.tools}
    mode = plan.choice.mode
    if mode == "none" or not tools:
        return None
    if plan.choice.name:
        return tools[plan.choice.name]
    if mode == "required" and len(tools) == 1:
        return next(iter(tools.values()))
    if mode == "auto" and conversation.turns and conversation.turns[-1].role == "tool":
        return None
    state = next((t.text for t in reversed(conversation.turns) if t.role == "user" and t.text.strip()),
                 "\n".join(conversation.system)) or "(empty)"
    state = decider.clip(state) if hasattr(decider, "clip") else state  # routing reads the message's head
    options = {} if mode == "required" else dict(RESPOND_PROTOTYPES)
    options.update({t.name: _describe(t) for t in tools.values()})
    answer = decider.decide(state, {"route": Question("choice", None, options)}).answers["route"]
    return tools.get(answer["choice"])


def _describe(tool: ToolSpec) -> str:
    words = tool.name.replace("_", " ").replace("-", " ")
    return f"{words}: {tool.description}" if tool.description else words


def _prompt(generator: Any, conversation: Conversation, plan: Plan, tool: ToolSpec | None) -> str:
    """The engine's prompt (Gemma's Q/A form, or a chat template); a tool call is an answer prefilled with
    CALL_PHRASE, so the grammar only has to produce the arguments."""
    system = list(conversation.system)
    turns = [(t.role, _render(t)) for t in conversation.turns]
    if tool is not None:
        params = ", ".join(tool.parameters.get("properties", {}))
        system.append(f"Tool {tool.name}({params}): {tool.description or ''}".rstrip(": "))
        turns.append(("assistant", CALL_PHRASE.format(name=tool.name)))
    elif plan.schema is not None:
        fields = ", ".join(plan.schema.get("properties", {}))
        system.append(f"Answer in JSON with the fields {fields}." if fields else "Answer in JSON.")
    prompt: str = generator.build_prompt("\n".join(system), turns)
    return prompt


def _render(turn: Turn) -> str:
    """A turn as plain text a base model can continue: calls and results become sentences."""
    if turn.role == "tool":
        return turn.text
    calls = [f"{CALL_PHRASE.format(name=c.name)}{c.arguments})." for c in turn.calls]
    return " ".join([turn.text, *calls] if turn.text else calls)


def _pieces(generator: Any, prompt: str, plan: Plan, usage: GenerationUsage, grammar: str | None,
            schema: Mapping[str, Any] | None, stops: Sequence[str] | None = None, lstrip: bool = True,
            ) -> Iterator[Piece]:
    """(text, finish reason, stop sequence, tokens) pieces of one answer, JSON-checked when there is a schema.

    Output that the grammar fully constrains streams as produced; otherwise each attempt is buffered,
    checked against the schema and generated again (up to JSON_ATTEMPTS) before anything is sent.
    Tool arguments pass `stops=()`: a caller's stop sequences end text, never a call half-way. A text answer
    (no grammar, not a prefill's continuation) is never empty: the engine's first token must show something."""
    def attempt(seed: int | None) -> Iterator[Piece]:
        request = GenerationRequest(prompt=prompt, max_tokens=plan.max_tokens, temperature=plan.temperature,
                                    stop=() if grammar else tuple(generator.default_stop()), seed=seed, grammar=grammar,
                                    reuse_prefix=plan.reuse_prefix, require_text=grammar is None and lstrip,
                                    top_logprobs=plan.top_logprobs)
        used = GenerationUsage()
        try:
            with contextlib.closing(generator.stream(request, used)) as stream:
                yield from _cut(stream, plan.stop if stops is None else stops, lstrip)
        finally:
            usage.prompt_tokens = used.prompt_tokens
            usage.completion_tokens += used.completion_tokens

    if schema is None or enforced(generation_schema(schema)):
        yield from attempt(plan.seed)
        return
    for n in range(JSON_ATTEMPTS):
        pieces = list(attempt(None if plan.seed is None else plan.seed + n))
        text, reason = "".join(p[0] for p in pieces), pieces[-1][1]
        if reason == "length" or valid_json(text, schema):
            yield from pieces
            return
        log.info("generated JSON did not validate (attempt %d of %d)", n + 1, JSON_ATTEMPTS)
    raise APIError(500, f"The local model produced no output valid against the schema in {JSON_ATTEMPTS} "
                   "attempts", code="server_error")


# (text, finish reason, stop sequence, the tokens whose text ends in this piece, cut to the answer)
Piece = tuple[str, str | None, str | None, list[TokenLogprob]]


class _Tokens:
    """Where each engine token's text lies in the raw generated text, so the answer's pieces (trimmed and
    cut by `_cut`) carry exactly the tokens that wrote them: their texts join to the answer."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._spans: list[tuple[TokenLogprob, int, str]] = []  # token, start, its characters
        self._end = 0

    def add(self, tokens: Sequence[TokenLogprob]) -> None:
        for token in tokens:
            chars = self._decoder.decode(token.data)
            self._spans.append((token, self._end, chars))
            self._end += len(chars)

    def take(self, start: int, end: int, *, final: bool) -> list[TokenLogprob]:
        """Tokens that end by `end` (all that begin before it when `final`), cut to [start, end)."""
        out, kept = [], []
        for token, at, chars in self._spans:
            if at + len(chars) > end and not (final and at < end):
                kept.append((token, at, chars))
                continue
            part = chars[max(start - at, 0):max(end - at, 0)]
            if part:
                out.append(dataclasses.replace(token, data=part.encode("utf-8")))
        self._spans = kept
        return out


def _cut(stream: Iterator[Completion], stops: Sequence[str], lstrip: bool = True) -> Iterator[Piece]:
    """Engine pieces without leading or trailing whitespace, ended at the first caller stop sequence.

    Caller stop sequences are matched here rather than by the engine so that Anthropic's `stop_sequence`
    can say which one ended the text; a tail that may begin a stop sequence is held back until it cannot.
    The continuation of a prefilled answer keeps its leading space ("1, 2," + " 3"). `base` is where the
    buffer starts in the raw text, `start` where the answer does (for the tokens' texts)."""
    buffer, started, base, start, scored = "", not lstrip, 0, 0, _Tokens()
    hold = max((len(s) for s in stops), default=1) - 1
    for piece in stream:
        buffer += piece.text
        scored.add(piece.tokens)
        if not started:
            stripped = buffer.lstrip()
            base += len(buffer) - len(stripped)
            buffer, start, started = stripped, base, bool(stripped)
        hits = [(buffer.find(s), s) for s in stops if s in buffer]
        if hits:
            at, sequence = min(hits)
            text = buffer[:at].rstrip()
            yield text, "stop_sequence", sequence, scored.take(start, base + len(text), final=True)
            return
        if piece.finish_reason:
            text = buffer.rstrip()
            yield text, piece.finish_reason, None, scored.take(start, base + len(text), final=True)
            return
        cut = min(len(buffer) - hold, len(buffer.rstrip()))
        if cut > 0:
            yield buffer[:cut], None, None, scored.take(start, base + cut, final=False)
            buffer, base = buffer[cut:], base + cut
    text = buffer.rstrip()
    yield text, "stop", None, scored.take(start, base + len(text), final=True)
