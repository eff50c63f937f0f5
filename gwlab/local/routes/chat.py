"""POST /v1/chat/completions on the local text model: JSON or SSE chunks (protocols.md section 2)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gwlab.local import textgen
from gwlab.local.auth import require_key
from gwlab.local.engines.base import TokenLogprob
from gwlab.local.errors import APIError, error_body
from gwlab.local.routes.text_request import TextRoute, accept
from gwlab.local.store import KeyRecord
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text
from gwlab.wire import chat as wire_chat
from gwlab.wire.chat import ChatRequest
from gwlab.wire.families import FAMILIES

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["chat"])
Key = Annotated[KeyRecord, Depends(require_key)]
ROUTE = TextRoute(FAMILIES["chat"], "messages", wire_chat.TOKEN_CAP_FIELDS)

MAX_CHOICES = 8  # n > 1 runs one generation per choice, one after the other on the same engine
_TEXT = {"text": "text"}
_ASSISTANT_PARTS = {"text": "text", "refusal": "refusal"}
LOWEST_LOGPROB = -9999.0
_FINISH = {"stop": "stop", "stop_sequence": "stop", "length": "length", "tool_calls": "tool_calls"}


@dataclass(slots=True)
class ChatRun:
    """A validated chat request as the local model runs it."""

    request: ChatRequest
    conversation: Conversation
    plan: Plan
    params: dict[str, str]  # where each schema sat, for grammar errors


@router.post("/chat/completions")
async def create_chat_completion(request: Request, key: Key) -> Any:
    chat = await accept(request, key, ROUTE, parse)
    if chat.request.stream:
        request.state.streamed = True
        return sse_response(_stream(request, chat))
    results = [await textgen.complete(chat.conversation, chat.plan) for _ in range(chat.request.n)]
    usage = _usage(results)
    request.state.usage = (usage["prompt_tokens"], usage["completion_tokens"])
    return {
        "id": textgen.new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
        "model": chat.plan.model, "service_tier": "default",  # no system_fingerprint: none to report
        "choices": [{"index": i, "message": _message(r), "finish_reason": _FINISH[r.reason],
                     "logprobs": _logprobs(chat.request.top_logprobs, None if r.calls else r.tokens)}
                    for i, r in enumerate(results)],
        "usage": usage,
    }


# --- request ---------------------------------------------------------------------------------------------
def parse(body: dict[str, Any], model: str) -> ChatRun:
    """The body checked by the chat validator (gwlab.wire.chat), then refused where the local model cannot
    honour it; every refusal is a 400 naming the field."""
    req = wire_chat.parse_request(body)
    tools = textgen.function_tools(req.tools)
    if body.get("web_search_options") is not None:
        raise APIError(400, "'web_search_options': the local model cannot search the web",
                       param="web_search_options")
    if req.n > MAX_CHOICES:
        raise APIError(400, f"'n' must be an integer from 1 to {MAX_CHOICES} on the local model", param="n")
    plan = textgen.plan_for(req, tools, model=model)
    plan.top_logprobs, plan.choices = req.top_logprobs, req.n
    params = {t.name: f"tools[{i}].function.parameters" for i, t in enumerate(tools)}
    params[""] = req.schema_field
    return ChatRun(req, _conversation(req.messages), plan, params)


def _conversation(messages: list[Any]) -> Conversation:
    conversation = Conversation()
    for i, message in enumerate(messages):
        role, content, where = message["role"], message.get("content"), f"messages[{i}].content"
        if role in ("system", "developer"):
            conversation.add_system(textgen.text_of_parts(content, where, _TEXT))
        elif role == "user":
            conversation.add_user(textgen.text_of_parts(content, where, _TEXT))
        elif role == "tool":
            conversation.add_tool_result(message["tool_call_id"], textgen.text_of_parts(content, where, _TEXT))
        else:
            text = "" if content is None else textgen.text_of_parts(content, where, _ASSISTANT_PARTS)
            calls = [textgen.ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "{}")
                     for c in message.get("tool_calls") or ()]
            conversation.add_assistant(text, calls)
    return conversation


# --- response --------------------------------------------------------------------------------------------
def _message(result: Finished) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if result.calls else result.text,
                               "refusal": None, "annotations": []}
    if result.calls:
        message["tool_calls"] = [_call(c) for c in result.calls]
    return message


def _logprobs(asked: int | None, tokens: list[TokenLogprob] | None) -> dict[str, Any] | None:
    """OpenAI's `logprobs` object: null unless asked; `content` null for a tool call (it has no content)."""
    if asked is None:
        return None
    return {"content": None if tokens is None else [_token(t) for t in tokens], "refusal": None}


def _token(token: TokenLogprob) -> dict[str, Any]:
    return {**_scored(token.data, token.logprob),
            "top_logprobs": [_scored(data, logprob) for data, logprob in token.top]}


def _scored(data: bytes, logprob: float) -> dict[str, Any]:
    # -9999 stands for a probability that underflows, as the hosted API writes it (JSON has no -Infinity)
    return {"token": data.decode("utf-8", "replace"), "logprob": max(logprob, LOWEST_LOGPROB), "bytes": list(data)}


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


async def _stream(request: Request, chat: ChatRun) -> AsyncIterator[bytes]:
    head = {"id": textgen.new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": chat.plan.model}

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None,
              logprobs: dict[str, Any] | None = None) -> bytes:
        payload = {**head, "choices": [{"index": index, "delta": delta, "logprobs": logprobs,
                                        "finish_reason": finish}]}
        return sse({**payload, "usage": None} if chat.request.include_usage else payload)

    results: list[Finished] = []
    try:
        for index in range(chat.request.n):
            opened = False
            async for event in textgen.generate(chat.conversation, chat.plan):
                if isinstance(event, Text):
                    if not opened:
                        opened = True
                        yield chunk(index, {"role": "assistant", "content": "", "refusal": None})
                    yield chunk(index, {"content": event.text},
                                logprobs=_logprobs(chat.request.top_logprobs, event.tokens))
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
    if chat.request.include_usage:
        yield sse({**head, "choices": [], "usage": usage})
    yield sse("[DONE]")
