"""POST /v1/messages (the messages-compatible protocol) on the local text model (protocols.md section 4).

Authenticated by `x-api-key` or Bearer with an `anthropic-version` header; errors come in the Anthropic
body shape (errors.py picks it from the path). A last assistant message is a prefill: the answer continues
it, as the hosted API does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gwlab.local import textgen
from gwlab.local.auth import require_messages_key
from gwlab.local.errors import APIError
from gwlab.local.routes.text_request import TextRoute, accept
from gwlab.local.store import KeyRecord
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import CallArguments, CallStarted, Finished, Started, Text
from gwlab.wire import messages as wire_messages
from gwlab.wire.families import FAMILIES
from gwlab.wire.limits import ANTHROPIC_VERSION_HEADER

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["messages"])
Key = Annotated[KeyRecord, Depends(require_messages_key)]
ROUTE = TextRoute(FAMILIES["messages"], "messages")

_STOP = {"stop": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens",
         "tool_calls": "tool_use"}
_TEXT = {"text": "text"}


@dataclass(slots=True)
class MessagesRun:
    """A validated messages request as the local model runs it."""

    model: str
    conversation: textgen.Conversation
    plan: textgen.Plan
    stream: bool
    params: dict[str, str]


@router.post("/messages")
async def create_message(request: Request, key: Key) -> Any:
    version = request.headers.get(ANTHROPIC_VERSION_HEADER, "")
    req = await accept(request, key, ROUTE, lambda body, model: parse(body, model, version))
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
def parse(body: dict[str, Any], model: str, version: str) -> MessagesRun:
    """The body checked by the messages validator (gwlab.wire.messages), then refused where the local
    model cannot honour it; every refusal is a 400 naming the field."""
    req = wire_messages.parse_request(body, version)
    thinking = req.body.get("thinking")
    if thinking is not None and thinking.get("type") != "disabled":
        raise APIError(400, "'thinking' is not available on the local model", param="thinking")
    conversation = textgen.Conversation()
    conversation.add_system("" if req.system is None else textgen.text_of_parts(req.system, "system", _TEXT))
    for i, message in enumerate(req.messages):
        _add(conversation, message, f"messages[{i}]")
    tools = textgen.function_tools(req.tools)
    plan = textgen.plan_for(req, tools, model=model, call_prefix="toolu_")
    params = {t.name: f"tools[{i}].input_schema" for i, t in enumerate(tools)}
    return MessagesRun(model, conversation, plan, req.stream, params)


def _add(conversation: textgen.Conversation, message: Mapping[str, Any], where: str) -> None:
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        (conversation.add_user if role == "user" else conversation.add_assistant)(content)
        return
    texts: list[str] = []
    calls: list[textgen.ToolCall] = []
    for j, block in enumerate(content):
        at, kind = f"{where}.content[{j}]", block["type"]
        if kind == "text":
            texts.append(block["text"])
        elif kind == "tool_use":
            calls.append(textgen.ToolCall(block["id"], block["name"], json.dumps(block["input"])))
        elif kind == "tool_result":
            if texts:  # keep the order of what the user said and what the tools returned
                conversation.add_user("\n".join(texts))
                texts = []
            text = textgen.text_of_parts(block.get("content", ""), f"{at}.content", _TEXT)
            conversation.add_tool_result(block["tool_use_id"], f"Error: {text}" if block.get("is_error") else text)
        else:
            allowed = "text, tool_use" if role == "assistant" else "text, tool_result"
            raise APIError(400, f"'{at}.type' {kind!r} is not supported in a {role} message here ({allowed})",
                           param=f"{at}.type")
    if role == "assistant":
        conversation.add_assistant(" ".join(texts), calls)
    elif texts:
        conversation.add_user("\n".join(texts))


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


async def _stream(request: Request, req: MessagesRun, message_id: str) -> AsyncIterator[bytes]:
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
