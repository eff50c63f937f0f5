"""POST /v1/chat/completions on the local text model: JSON or SSE chunks (protocols.md section 2)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gwlab.local import textgen
from gwlab.local.auth import require_key, require_model
from gwlab.local.body import field, read_json
from gwlab.local.errors import APIError, error_body
from gwlab.local.store import KeyRecord
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text, ToolChoice
from gwlab.wire.chat import cap_conflict
from gwlab.wire.tools import ToolSpec

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["chat"])
Key = Annotated[KeyRecord, Depends(require_key)]

MAX_CHOICES = 8  # n > 1 runs one generation per choice, one after the other on the same engine
ROLES = ("system", "developer", "user", "assistant", "tool")
_TEXT = {"text": "text"}
_FINISH = {"stop": "stop", "stop_sequence": "stop", "length": "length", "tool_calls": "tool_calls"}


@dataclass(slots=True)
class ChatRequest:
    model: str
    conversation: Conversation
    plan: Plan
    n: int
    stream: bool
    include_usage: bool
    params: dict[str, str]  # where each schema sat, for grammar errors


@router.post("/chat/completions")
async def create_chat_completion(request: Request, key: Key) -> Any:
    body = await read_json(request)
    info = require_model(key, body.get("model"), "chat")
    request.state.model = info.id
    chat = parse(body, info.id)
    await textgen.prepare(chat.plan, chat.params, chat.conversation, "messages")
    if chat.stream:
        request.state.streamed = True
        return sse_response(_stream(request, chat))
    results = [await textgen.complete(chat.conversation, chat.plan) for _ in range(chat.n)]
    usage = _usage(results)
    request.state.usage = (usage["prompt_tokens"], usage["completion_tokens"])
    return {
        "id": textgen.new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
        "model": chat.model, "system_fingerprint": None, "service_tier": "default",
        "choices": [{"index": i, "message": _message(r), "logprobs": None, "finish_reason": _FINISH[r.reason]}
                    for i, r in enumerate(results)],
        "usage": usage,
    }


# --- request ---------------------------------------------------------------------------------------------
def parse(body: dict[str, Any], model: str) -> ChatRequest:
    """Every field the local model honours, checked; a wrong one is a 400 naming it."""
    conversation = _conversation(field(body, "messages", list, required=True))
    plan, params = Plan(model=model), {}
    tools = [_tool(t, i) for i, t in enumerate(field(body, "tools", list, default=[]))]
    textgen.check_tools(tools, "tools")
    plan.tools, plan.choice = _tool_choice(body.get("tool_choice"), tools)
    params.update({t.name: f"tools[{i}].function.parameters" for i, t in enumerate(tools)})
    plan.schema, params[""] = _response_format(field(body, "response_format", dict))
    limit = textgen.check_count(body.get("max_completion_tokens"), "max_completion_tokens")
    legacy = textgen.check_count(body.get("max_tokens"), "max_tokens")
    conflict = cap_conflict(body)  # both names with one value is how gwlab and others send a cap
    if conflict:
        raise APIError(400, f"'max_tokens' {conflict}", param="max_tokens")
    plan.max_tokens = limit or legacy or plan.max_tokens
    temperature = textgen.check_number(body.get("temperature"), "temperature", 0, 2)
    plan.temperature = plan.temperature if temperature is None else temperature
    textgen.check_number(body.get("top_p"), "top_p", 0, 1)  # accepted; the engine samples with its own
    for name in ("presence_penalty", "frequency_penalty"):
        textgen.check_number(body.get(name), name, -2, 2)
    plan.seed = field(body, "seed", int)
    if body.get("stop") is not None:
        plan.stop = textgen.check_stop(body["stop"], "stop")
    if field(body, "logprobs", bool):
        raise APIError(400, "'logprobs' is not supported by the local model", param="logprobs")
    if body.get("web_search_options") is not None:
        raise APIError(400, "'web_search_options': the local model cannot search the web",
                       param="web_search_options")
    field(body, "parallel_tool_calls", bool)  # accepted: the local model makes at most one call per turn
    n = textgen.check_count(body.get("n"), "n", 1, MAX_CHOICES) or 1
    stream = bool(field(body, "stream", bool))
    options = field(body, "stream_options", dict)
    if options is not None and not stream:
        raise APIError(400, "'stream_options' is only allowed with 'stream': true", param="stream_options")
    include_usage = bool(field(options or {}, "include_usage", bool, path="stream_options.include_usage"))
    return ChatRequest(model, conversation, plan, n, stream, include_usage, params)


def _conversation(messages: list[Any]) -> Conversation:
    if not messages:
        raise APIError(400, "'messages' must hold at least one message", param="messages")
    conversation = Conversation()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise APIError(400, f"'{where}' must be an object", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise APIError(400, f"'{where}.role' must be one of {', '.join(ROLES)}, got {role!r}",
                           param=f"{where}.role")
        content = message.get("content")
        if role != "assistant" and content is None:
            raise APIError(400, f"Missing required field '{where}.content'", param=f"{where}.content")
        if role in ("system", "developer"):
            conversation.add_system(textgen.text_of_parts(content, f"{where}.content", _TEXT))
        elif role == "user":
            conversation.add_user(textgen.text_of_parts(content, f"{where}.content", _TEXT))
        elif role == "tool":
            call_id = field(message, "tool_call_id", str, required=True, path=f"{where}.tool_call_id")
            conversation.add_tool_result(call_id, textgen.text_of_parts(content, f"{where}.content", _TEXT))
        else:
            text = "" if content is None else textgen.text_of_parts(
                content, f"{where}.content", {"text": "text", "refusal": "refusal"})
            calls = _tool_calls(field(message, "tool_calls", list, default=[], path=f"{where}.tool_calls"),
                                f"{where}.tool_calls")
            if content is None and not calls:
                raise APIError(400, f"'{where}.content' is required unless 'tool_calls' is given",
                               param=f"{where}.content")
            conversation.add_assistant(text, calls)
    return conversation


def _tool_calls(calls: list[Any], where: str) -> list[textgen.ToolCall]:
    out = []
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        if not isinstance(call, dict):
            raise APIError(400, f"'{at}' must be an object", param=at)
        if call.get("type", "function") != "function":
            raise APIError(400, f"'{at}.type' must be 'function'", param=f"{at}.type")
        function = field(call, "function", dict, required=True, path=f"{at}.function")
        out.append(textgen.ToolCall(
            field(call, "id", str, required=True, path=f"{at}.id"),
            field(function, "name", str, required=True, path=f"{at}.function.name"),
            field(function, "arguments", str, default="{}", path=f"{at}.function.arguments")))
    return out


def _tool(tool: Any, i: int) -> ToolSpec:
    where = f"tools[{i}]"
    if not isinstance(tool, dict):
        raise APIError(400, f"'{where}' must be an object", param=where)
    if tool.get("type") != "function":
        raise APIError(400, f"'{where}.type' must be 'function' (the local model has no {tool.get('type')!r} "
                       "tools)", param=f"{where}.type")
    field(tool, "function", dict, required=True, path=f"{where}.function")
    return textgen.read_tool(tool, where)


def _tool_choice(choice: Any, tools: list[ToolSpec]) -> tuple[tuple[ToolSpec, ...], ToolChoice]:
    if choice is None:
        return tuple(tools), ToolChoice("auto" if tools else "none")
    if choice in ("none", "auto", "required"):
        if choice == "required" and not tools:
            raise APIError(400, "'tool_choice' required needs at least one tool in 'tools'",
                           param="tool_choice")
        return tuple(tools), ToolChoice(choice)
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = field(choice, "function", dict, required=True, path="tool_choice.function")
        return tuple(tools), textgen.named_choice(tools, function.get("name"), "tool_choice.function.name")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = field(choice, "allowed_tools", dict, required=True, path="tool_choice.allowed_tools")
        mode = allowed.get("mode")
        if mode not in ("auto", "required"):
            raise APIError(400, "'tool_choice.allowed_tools.mode' must be 'auto' or 'required'",
                           param="tool_choice.allowed_tools.mode")
        listed = field(allowed, "tools", list, required=True, path="tool_choice.allowed_tools.tools")
        names = [(t.get("function") or {}).get("name") if isinstance(t, dict) else None for t in listed]
        for j, name in enumerate(names):
            textgen.named_choice(tools, name, f"tool_choice.allowed_tools.tools[{j}].function.name")
        return tuple(t for t in tools if t.name in names), ToolChoice(mode)
    raise APIError(400, "'tool_choice' must be 'none', 'auto', 'required', a function or allowed_tools",
                   param="tool_choice")


def _response_format(fmt: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    kind = None if fmt is None else fmt.get("type")
    if kind in (None, "text"):
        return None, ""
    if kind == "json_object":
        return {"type": "object"}, "response_format"
    if kind == "json_schema":
        spec = field(fmt, "json_schema", dict, required=True, path="response_format.json_schema")
        field(spec, "name", str, required=True, path="response_format.json_schema.name")
        schema = spec.get("schema", {"type": "object"})
        return textgen.check_schema(schema, "response_format.json_schema.schema"), \
            "response_format.json_schema.schema"
    raise APIError(400, "'response_format.type' must be text, json_object or json_schema",
                   param="response_format.type")


# --- response --------------------------------------------------------------------------------------------
def _message(result: Finished) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if result.calls else result.text,
                               "refusal": None, "annotations": []}
    if result.calls:
        message["tool_calls"] = [_call(c) for c in result.calls]
    return message


def _call(call: textgen.ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _usage(results: list[Finished]) -> dict[str, Any]:
    # every choice reads the same conversation: its prompt is counted once, as the hosted API does
    prompt = max((r.usage.prompt_tokens for r in results), default=0)
    completion = sum(r.usage.completion_tokens for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


async def _stream(request: Request, chat: ChatRequest) -> AsyncIterator[bytes]:
    head = {"id": textgen.new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": chat.model, "system_fingerprint": None}

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {**head, "choices": [{"index": index, "delta": delta, "logprobs": None,
                                        "finish_reason": finish}]}
        return sse({**payload, "usage": None} if chat.include_usage else payload)

    results: list[Finished] = []
    try:
        for index in range(chat.n):
            opened = False
            async for event in textgen.generate(chat.conversation, chat.plan):
                if isinstance(event, Text):
                    if not opened:
                        opened = True
                        yield chunk(index, {"role": "assistant", "content": "", "refusal": None})
                    yield chunk(index, {"content": event.text})
                elif isinstance(event, CallStarted):
                    opened = True
                    first = {"index": event.index, **_call(event.call)}
                    yield chunk(index, {"role": "assistant", "content": None, "tool_calls": [first]})
                elif isinstance(event, CallArguments):
                    yield chunk(index, {"tool_calls": [{"index": event.index,
                                                        "function": {"arguments": event.text}}]})
                elif isinstance(event, Finished):
                    if not opened:
                        yield chunk(index, {"role": "assistant", "content": "", "refusal": None})
                    results.append(event)
                    yield chunk(index, {}, _FINISH[event.reason])
    except Exception as exc:  # the status is already 200: the error travels in the stream (section 1)
        if not isinstance(exc, APIError):
            log.exception("chat stream failed")
        error = exc if isinstance(exc, APIError) else APIError(500, "The local model failed",
                                                               code="server_error")
        yield sse(error_body("openai", error.status, error.message, code=error.code, param=error.param))
        return
    usage = _usage(results)
    request.state.usage = (usage["prompt_tokens"], usage["completion_tokens"])
    if chat.include_usage:
        yield sse({**head, "choices": [], "usage": usage})
    yield sse("[DONE]")
