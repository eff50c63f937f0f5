"""Function tools on the client: pick one with a decision, run calls honestly, loop chat or responses.

The application runs tools, never the gateway (spec, migration rule 4): each call's arguments are
checked against its tool's schema before the function runs, and a bad call, an unknown tool or a
function that raises becomes a *failed* `ToolOutcome`, sent back as `{"error": ...}`, never as a
normal result. Calls run one at a time in the order the model asked (their side effects may depend
on each other). Plain functions run on a worker thread: a tool may itself call the sync gateway,
which would deadlock on the loop thread, and a slow tool must not stall other requests; `async def`
functions are awaited on the loop.

`select_tool` asks a decision model which tool fits; it never executes anything and never yields
tool_calls (spec, Decision response rule 3): the caller acts on the name.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gwlab.client.chat import AsyncChat
from gwlab.client.decisions import AsyncDecisions, State
from gwlab.client.loop import LoopThread
from gwlab.client.responses import AsyncResponses
from gwlab.client.transport.core import AsyncTransport
from gwlab.errors import GatewayError, InvalidRequest
from gwlab.wire import chat, responses
from gwlab.wire import tools as wire
from gwlab.wire.decisions import DecisionResult
from gwlab.wire.tools import ToolOutcome, ToolSpec

__all__ = [
    "AsyncTools",
    "Call",
    "ToolOutcome",
    "ToolRun",
    "ToolSelection",
    "Tools",
    "chat_with_tools",
    "outcomes_to_items",
    "outcomes_to_messages",
    "respond_with_tools",
    "run_tools",
    "select_tool",
    "tool_calls_of",
]

ToolsArg = Iterable[Mapping[str, Any] | ToolSpec]
Functions = Mapping[str, Callable[..., Any]]
_QUESTION = "tool"  # the question id of a selection request


# --- calls in one form ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One function call the model asked for, whichever protocol it came in."""

    call_id: str
    name: str
    arguments: str | Mapping[str, Any] = ""


def tool_calls_of(source: Any) -> list[Call]:
    """The function calls in a chat completion, a responses result, a chat message, or a list of calls
    or output items (typed or JSON); items that are not function calls (messages, reasoning) are skipped."""
    if isinstance(source, chat.ChatCompletion | responses.Response | chat.ChatMessage):
        return [call for c in source.tool_calls if (call := _call(c)) is not None]
    if isinstance(source, Mapping):
        if isinstance(source.get("choices"), list):  # a chat completion body: its first choice
            first = source["choices"][0] if source["choices"] else {}
            return tool_calls_of(first.get("message") or {} if isinstance(first, Mapping) else {})
        for key in ("output", "tool_calls"):  # a responses body, a chat message
            if isinstance(source.get(key), list):
                return tool_calls_of(source[key])
        call = _call(source)
        return [call] if call is not None else []
    if isinstance(source, str | bytes) or not isinstance(source, Iterable):
        raise InvalidRequest("tool_calls", f"expected a result, a message or a list of calls; got "
                                           f"{type(source).__name__}")
    return [call for call in map(_call, source) if call is not None]


def _call(item: Any) -> Call | None:
    if isinstance(item, Call):
        return item
    if isinstance(item, chat.ToolCall):
        return Call(item.id or "", item.name or "", item.arguments) if item.type == "function" else None
    if isinstance(item, responses.FunctionCall):
        return Call(item.call_id or "", item.name or "", item.arguments)
    if not isinstance(item, Mapping):
        return None
    if item.get("type") == "function_call":  # a responses item
        return Call(str(item.get("call_id") or ""), str(item.get("name") or ""), item.get("arguments") or "")
    function = item.get("function")
    if isinstance(function, Mapping) and item.get("type", "function") == "function":  # a chat call
        arguments = function.get("arguments") or ""
        return Call(str(item.get("id") or ""), str(function.get("name") or ""), arguments)
    return None


# --- running calls ----------------------------------------------------------------------------------


async def run_tools(calls: Any, functions: Functions, tools: ToolsArg) -> list[ToolOutcome]:
    """Run every function call in `calls` (see `tool_calls_of`), in order, one outcome per call.

    Arguments are validated against the tool's schema first: a call that fails it, names a tool not
    in `tools` or without a function, or whose function raises, gives a failed outcome and the
    function is not called (or its exception is kept as the error). Never raises for a tool's fault.
    """
    specs = {spec.name: spec for spec in wire.parse_tools(tools)}
    return [await _run_one(call, functions, specs) for call in tool_calls_of(calls)]


async def _run_one(call: Call, functions: Functions, specs: Mapping[str, ToolSpec]) -> ToolOutcome:
    spec, function = specs.get(call.name), functions.get(call.name)
    if spec is None:
        offered = ", ".join(specs) or "none"
        return ToolOutcome.failure(call.call_id, call.name,
                                   f"unknown tool {call.name!r}: not among the tools offered ({offered})")
    if function is None:
        return ToolOutcome.failure(call.call_id, call.name, f"no function was given for tool {call.name!r}")
    try:
        values = wire.validate_arguments(spec, call.arguments)
    except InvalidRequest as exc:
        return ToolOutcome.failure(call.call_id, call.name, f"invalid arguments: {exc}")
    try:
        if _is_async(function):
            result = await function(**values)
        else:
            result = await asyncio.to_thread(function, **values)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:  # the tool's own failure is data for the model, not a crash of the loop
        return ToolOutcome.failure(call.call_id, call.name, exc)
    try:
        return ToolOutcome.success(call.call_id, call.name, result)
    except (TypeError, ValueError) as exc:  # json.dumps refused the result
        return ToolOutcome.failure(call.call_id, call.name, f"the result is not JSON-serialisable: {exc}")


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None))  # noqa: B004 (an object with an async __call__)


def outcomes_to_messages(outcomes: Iterable[ToolOutcome]) -> list[dict[str, Any]]:
    """The chat `tool` messages answering the calls (append them after the assistant message)."""
    return [wire.outcome_to_chat_message(outcome) for outcome in outcomes]


def outcomes_to_items(outcomes: Iterable[ToolOutcome]) -> list[dict[str, Any]]:
    """The responses `function_call_output` items: the whole input of the next request with
    `previous_response_id` (the earlier items live on the server)."""
    return [wire.outcome_to_responses_item(outcome) for outcome in outcomes]


# --- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """The tool a decision model picked for a context; `name` is None when "none" (no tool) won."""

    name: str | None
    probabilities: Mapping[str, float] = field(default_factory=dict)
    confidence: float | None = None
    raw: DecisionResult | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ToolRun:
    """What a tool loop did: every answer, every outcome, and the history it built.

    `history` is, for chat, the whole conversation (replayable as the next `messages`); for
    responses, the input items this client sent (the rest lives on the server, reached through
    `result.id` as `previous_response_id`). `pending` holds calls of the last answer left unrun
    because `max_rounds` was reached.
    """

    result: chat.ChatCompletion | responses.Response
    results: list[Any]
    outcomes: list[ToolOutcome]
    history: list[dict[str, Any]]
    pending: list[Call] = field(default_factory=list)

    @property
    def is_complete(self) -> bool:
        """Whether the model stopped asking for tools within `max_rounds` (see `result` for its status)."""
        return not self.pending

    @property
    def text(self) -> str:
        return self.result.text


# --- the family ---------------------------------------------------------------------------------------


class AsyncTools:
    """Tool selection by decision, function calling loops over chat and responses."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._chat = AsyncChat(transport)
        self._responses = AsyncResponses(transport)
        self._decisions = AsyncDecisions(transport)

    async def select_tool(self, tools: ToolsArg, context: State, *, model: str,
                          instructions: str | None = None, allow_none: bool = True) -> ToolSelection:
        """Which tool fits `context`, as one choice question over the tool names and descriptions."""
        question = wire.selection_question(tools, instructions, allow_none=allow_none)
        result = await self._decisions.create(context, {_QUESTION: question}, model=model)
        answer = result.answers.get(_QUESTION)
        name = getattr(answer, "choice", None)
        return ToolSelection(None if name == wire.NO_TOOL else name, getattr(answer, "probabilities", {}),
                             getattr(answer, "confidence", None), result)

    async def run(self, calls: Any, functions: Functions, tools: ToolsArg) -> list[ToolOutcome]:
        """`run_tools`: validate, then run each call; failures are outcomes, never results."""
        return await run_tools(calls, functions, tools)

    async def chat_with_tools(self, messages: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                              functions: Functions, *, model: str, max_rounds: int = 4,
                              tool_choice: Any = None, **params: Any) -> ToolRun:
        """Chat until the model answers without calling a tool, running its calls in between.

        The full history is replayed each round (chat has no server-side state). `tool_choice`
        applies to the first round only; later rounds leave it to the gateway (auto), or "required"
        would force a call every round and the loop could never end.
        """
        rounds = _rounds(max_rounds)
        specs = wire.parse_tools(tools)
        offered = [wire.to_chat(spec) for spec in specs]
        history: list[dict[str, Any]] = ([{"role": "user", "content": messages}] if isinstance(messages, str)
                                         else [dict(message) for message in messages])
        results: list[Any] = []
        outcomes: list[ToolOutcome] = []
        for round_number in range(1, rounds + 1):
            result = await self._chat.create(history, model=model, tools=offered, tool_choice=tool_choice,
                                             **params)
            results.append(result)
            calls = tool_calls_of(result)
            history.append(_assistant_turn(result))
            if not calls or round_number == rounds:
                return ToolRun(result, results, outcomes, history, calls)
            done = await run_tools(calls, functions, specs)
            outcomes.extend(done)
            history.extend(outcomes_to_messages(done))
            tool_choice = None
        raise AssertionError("unreachable")  # pragma: no cover

    async def respond_with_tools(self, input: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                                 functions: Functions, *, model: str, instructions: str | None = None,
                                 max_rounds: int = 4, tool_choice: Any = None, **params: Any) -> ToolRun:
        """The responses loop: each round sends only the `function_call_output` items, continuing with
        `previous_response_id`, and never replays the history with it (spec, migration rule 3).
        `instructions` are sent again every round: they are not inherited (migration rule 2)."""
        rounds = _rounds(max_rounds)
        if params.get("store") is False:
            raise InvalidRequest("store", "the loop continues with previous_response_id, which needs stored "
                                          "responses; use chat_with_tools to replay the history instead")
        specs = wire.parse_tools(tools)
        offered = [wire.to_responses(spec) for spec in specs]
        previous = params.pop("previous_response_id", None)
        next_input: str | Sequence[Mapping[str, Any]] = input
        history: list[dict[str, Any]] = []
        results: list[Any] = []
        outcomes: list[ToolOutcome] = []
        for round_number in range(1, rounds + 1):
            result = await self._responses.create(next_input, model=model, tools=offered,
                                                  tool_choice=tool_choice, instructions=instructions,
                                                  previous_response_id=previous, **params)
            results.append(result)
            history.extend([{"role": "user", "content": next_input}] if isinstance(next_input, str)
                           else [dict(item) for item in next_input])
            calls = tool_calls_of(result)
            if not calls or round_number == rounds:
                return ToolRun(result, results, outcomes, history, calls)
            if not result.id:
                raise GatewayError("the response carries no id, so its tool results cannot be sent with "
                                   "previous_response_id; use chat_with_tools instead")
            done = await run_tools(calls, functions, specs)
            outcomes.extend(done)
            next_input, previous, tool_choice = outcomes_to_items(done), result.id, None
        raise AssertionError("unreachable")  # pragma: no cover


def _rounds(max_rounds: int) -> int:
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise InvalidRequest("max_rounds", f"must be an integer of at least 1; got {max_rounds!r}")
    return max_rounds


def _assistant_turn(result: chat.ChatCompletion) -> dict[str, Any]:
    """The assistant message to replay: its text and its calls as sent (ids must match the answers)."""
    message = result.choices[0].message if result.choices else chat.ChatMessage("assistant", "")
    turn: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        turn["tool_calls"] = [dict(call.raw) or _chat_call(call) for call in message.tool_calls]
    elif turn["content"] is None:
        turn["content"] = ""
    return turn


def _chat_call(call: chat.ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": call.type, "function": {"name": call.name, "arguments": call.arguments}}


class Tools:
    def __init__(self, twin: AsyncTools, loop: LoopThread) -> None:
        self._twin, self._loop = twin, loop

    def select_tool(self, tools: ToolsArg, context: State, *, model: str, instructions: str | None = None,
                    allow_none: bool = True) -> ToolSelection:
        return self._loop.run(self._twin.select_tool(tools, context, model=model, instructions=instructions,
                                                     allow_none=allow_none))

    def run(self, calls: Any, functions: Functions, tools: ToolsArg) -> list[ToolOutcome]:
        return self._loop.run(self._twin.run(calls, functions, tools))

    def chat_with_tools(self, messages: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                        functions: Functions, *, model: str, max_rounds: int = 4, tool_choice: Any = None,
                        **params: Any) -> ToolRun:
        return self._loop.run(self._twin.chat_with_tools(messages, tools, functions, model=model,
                                                         max_rounds=max_rounds, tool_choice=tool_choice,
                                                         **params))

    def respond_with_tools(self, input: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                           functions: Functions, *, model: str, instructions: str | None = None,
                           max_rounds: int = 4, tool_choice: Any = None, **params: Any) -> ToolRun:
        return self._loop.run(self._twin.respond_with_tools(input, tools, functions, model=model,
                                                            instructions=instructions, max_rounds=max_rounds,
                                                            tool_choice=tool_choice, **params))


# --- the same, given a gateway (sync: the answer; async: a coroutine to await) -------------------------


def select_tool(gw: Any, tools: ToolsArg, context: State, *, model: str, instructions: str | None = None,
                allow_none: bool = True) -> Any:
    """`gw.tools.select_tool(...)`: a `ToolSelection` (sync gateway) or an awaitable (async gateway)."""
    return gw.tools.select_tool(tools, context, model=model, instructions=instructions, allow_none=allow_none)


def chat_with_tools(gw: Any, messages: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                    functions: Functions, model: str, max_rounds: int = 4, **params: Any) -> Any:
    """`gw.tools.chat_with_tools(...)`: a `ToolRun` from a `Gateway`, an awaitable from an `AsyncGateway`."""
    return gw.tools.chat_with_tools(messages, tools, functions, model=model, max_rounds=max_rounds, **params)


def respond_with_tools(gw: Any, input: str | Sequence[Mapping[str, Any]], tools: ToolsArg,
                       functions: Functions, model: str, max_rounds: int = 4, **params: Any) -> Any:
    """`gw.tools.respond_with_tools(...)`: a `ToolRun` (sync) or an awaitable (async gateway)."""
    return gw.tools.respond_with_tools(input, tools, functions, model=model, max_rounds=max_rounds, **params)

