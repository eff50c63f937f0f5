"""POST /v1/messages (the messages-compatible protocol) on the local text model (protocols.md section 4).

Authenticated by `x-api-key` or Bearer with an `anthropic-version` header; errors come in the Anthropic
body shape (errors.py picks it from the path). A last assistant message is a prefill: the answer continues
it, as the hosted API does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gwlab.local import textgen
from gwlab.local.auth import require_messages_key, require_model
from gwlab.local.body import field, read_json
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import (
    CallArguments,
    CallStarted,
    Conversation,
    Finished,
    Plan,
    Started,
    Text,
    ToolChoice,
)
from gwlab.wire.limits import ANTHROPIC_VERSION_HEADER
from gwlab.wire.tools import ToolSpec

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["messages"])
Key = Annotated[KeyRecord, Depends(require_messages_key)]

# the version anthropic SDK 2.x sends refuses sampling parameters (protocols.md section 4.2)
NO_SAMPLING_VERSION = "2026-10-21"
SAMPLING_FIELDS = ("temperature", "top_p", "top_k")
_STOP = {"stop": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens",
         "tool_calls": "tool_use"}
_TEXT = {"text": "text"}


@dataclass(slots=True)
class MessagesRequest:
    model: str
    conversation: Conversation
    plan: Plan
    stream: bool
    params: dict[str, str]


@router.post("/messages")
async def create_message(request: Request, key: Key) -> Any:
    body = await read_json(request)
    info = require_model(key, body.get("model"), "messages")
    request.state.model = info.id
    req = parse(body, info.id, request.headers.get(ANTHROPIC_VERSION_HEADER, ""))
    await textgen.prepare(req.plan, req.params, req.conversation, "messages")
    message_id = textgen.new_id("msg_")
    if req.stream:
        request.state.streamed = True
        return sse_response(_stream(request, req, message_id))
    result = await textgen.complete(req.conversation, req.plan)
    request.state.usage = (result.usage.prompt_tokens, result.usage.completion_tokens)
    return {**_head(message_id, req.model), "content": _content(result), "stop_reason": _STOP[result.reason],
            "stop_sequence": result.stop_sequence, "usage": _usage(result.usage.prompt_tokens,
                                                                   result.usage.completion_tokens)}


# --- request ---------------------------------------------------------------------------------------------
def parse(body: dict[str, Any], model: str, version: str) -> MessagesRequest:
    """Every field the local model honours, checked; a wrong one is a 400 naming it."""
    plan = Plan(call_prefix="toolu_", model=model)
    plan.max_tokens = textgen.check_count(field(body, "max_tokens", int, required=True), "max_tokens") or 1
    conversation = Conversation()
    conversation.add_system(_system(body.get("system")))
    messages = field(body, "messages", list, required=True)
    if not messages:
        raise APIError(400, "'messages' must hold at least one message", param="messages")
    for i, message in enumerate(messages):
        _add(conversation, message, f"messages[{i}]")
    tools = [_tool(t, i) for i, t in enumerate(field(body, "tools", list, default=[]))]
    textgen.check_tools(tools, "tools")
    plan.tools, plan.choice = tuple(tools), _tool_choice(field(body, "tool_choice", dict), tools)
    if body.get("stop_sequences") is not None:
        plan.stop = textgen.check_stop(field(body, "stop_sequences", list), "stop_sequences")
    for name in SAMPLING_FIELDS:
        if body.get(name) is not None and version == NO_SAMPLING_VERSION:
            raise APIError(400, f"'{name}' is not accepted under anthropic-version {NO_SAMPLING_VERSION}",
                           param=name)
    temperature = textgen.check_number(body.get("temperature"), "temperature", 0, 1)
    plan.temperature = plan.temperature if temperature is None else temperature
    textgen.check_number(body.get("top_p"), "top_p", 0, 1)  # accepted; the engine samples its own way
    textgen.check_count(body.get("top_k"), "top_k", 0)
    field(body, "metadata", dict)
    thinking = field(body, "thinking", dict)
    if thinking is not None and thinking.get("type") != "disabled":
        raise APIError(400, "'thinking' is not available on the local model", param="thinking")
    params = {t.name: f"tools[{i}].input_schema" for i, t in enumerate(tools)}
    return MessagesRequest(model, conversation, plan, bool(field(body, "stream", bool)), params)


def _system(system: Any) -> str:
    if system is None:
        return ""
    return textgen.text_of_parts(system, "system", _TEXT)


def _add(conversation: Conversation, message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise APIError(400, f"'{where}' must be an object", param=where)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise APIError(400, f"'{where}.role' must be 'user' or 'assistant', got {role!r}",
                       param=f"{where}.role")
    content = message.get("content")
    if isinstance(content, str):
        (conversation.add_user if role == "user" else conversation.add_assistant)(content)
        return
    if not isinstance(content, list):
        raise APIError(400, f"'{where}.content' must be a string or an array of content blocks",
                       param=f"{where}.content")
    texts: list[str] = []
    calls: list[textgen.ToolCall] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(field(block, "text", str, required=True, path=f"{at}.text"))
        elif kind == "tool_use" and role == "assistant":
            arguments = field(block, "input", dict, required=True, path=f"{at}.input")
            calls.append(textgen.ToolCall(field(block, "id", str, required=True, path=f"{at}.id"),
                                          field(block, "name", str, required=True, path=f"{at}.name"),
                                          json.dumps(arguments)))
        elif kind == "tool_result" and role == "user":
            if texts:  # keep the order of what the user said and what the tools returned
                conversation.add_user("\n".join(texts))
                texts = []
            call_id = field(block, "tool_use_id", str, required=True, path=f"{at}.tool_use_id")
            result = block.get("content", "")
            text = textgen.text_of_parts(result, f"{at}.content", _TEXT)
            error = field(block, "is_error", bool, path=f"{at}.is_error")
            conversation.add_tool_result(call_id, f"Error: {text}" if error else text)
        else:
            allowed = "text, tool_use" if role == "assistant" else "text, tool_result"
            raise APIError(400, f"'{at}.type' {kind!r} is not supported in a {role} message here ({allowed})",
                           param=f"{at}.type")
    if role == "assistant":
        conversation.add_assistant(" ".join(texts), calls)
    elif texts:
        conversation.add_user("\n".join(texts))


def _tool(tool: Any, i: int) -> ToolSpec:
    where = f"tools[{i}]"
    if not isinstance(tool, dict):
        raise APIError(400, f"'{where}' must be an object", param=where)
    if tool.get("type", "custom") != "custom":
        raise APIError(400, f"'{where}.type' {tool.get('type')!r} is not available on the local model "
                       "(client tools only)", param=f"{where}.type")
    field(tool, "input_schema", dict, required=True, path=f"{where}.input_schema")
    return textgen.read_tool(tool, where)


def _tool_choice(choice: dict[str, Any] | None, tools: list[ToolSpec]) -> ToolChoice:
    kind = "auto" if choice is None else choice.get("type")
    field(choice or {}, "disable_parallel_tool_use", bool, path="tool_choice.disable_parallel_tool_use")
    if kind in ("any", "tool") and not tools:
        raise APIError(400, f"'tool_choice' {kind} needs at least one tool in 'tools'",
                       param="tool_choice.type")
    if kind == "none" or not tools:
        return ToolChoice("none")
    if kind == "auto":
        return ToolChoice("auto")
    if kind == "any":
        return ToolChoice("required")
    if kind == "tool":
        return textgen.named_choice(tools, (choice or {}).get("name"), "tool_choice.name")
    raise APIError(400, "'tool_choice.type' must be auto, any, tool or none", param="tool_choice.type")


# --- response --------------------------------------------------------------------------------------------
def _head(message_id: str, model: str) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model}


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "service_tier": "standard"}


def _input(call: textgen.ToolCall) -> dict[str, Any]:
    """tool_use.input is an object; arguments cut by max_tokens cannot be one, so they become {}."""
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _content(result: Finished) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": result.text}] if result.text else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)} for c in result.calls]
    return blocks


async def _stream(request: Request, req: MessagesRequest, message_id: str) -> AsyncIterator[bytes]:
    """message_start, ping, one content block (text or tool_use), message_delta, message_stop."""

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, event=kind)

    block_open = False
    try:
        async for item in textgen.generate(req.conversation, req.plan):
            if isinstance(item, Started):
                start = {**_head(message_id, req.model), "content": [], "stop_reason": None,
                         "stop_sequence": None, "usage": _usage(item.prompt_tokens, 0)}
                yield event("message_start", message=start)
                yield event("ping")
            elif isinstance(item, Text):
                if not block_open:
                    block_open = True
                    yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
                yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": item.text})
            elif isinstance(item, CallStarted):
                block_open = True
                block = {"type": "tool_use", "id": item.call.id, "name": item.call.name, "input": {}}
                yield event("content_block_start", index=0, content_block=block)
                yield event("content_block_delta", index=0,
                            delta={"type": "input_json_delta", "partial_json": ""})
            elif isinstance(item, CallArguments):
                yield event("content_block_delta", index=0,
                            delta={"type": "input_json_delta", "partial_json": item.text})
            elif isinstance(item, Finished):
                if block_open:
                    yield event("content_block_stop", index=0)
                used = item.usage
                request.state.usage = (used.prompt_tokens, used.completion_tokens)
                delta = {"stop_reason": _STOP[item.reason], "stop_sequence": item.stop_sequence}
                usage = {"input_tokens": used.prompt_tokens, "output_tokens": used.completion_tokens}
                yield event("message_delta", delta=delta, usage=usage)
                yield event("message_stop")
    except Exception as exc:  # the status is already 200: the error travels as an error event
        if not isinstance(exc, APIError):
            log.exception("messages stream failed")
        message = exc.message if isinstance(exc, APIError) else "The local model failed"
        yield event("error", error={"type": "api_error", "message": message})
