"""POST /v1/responses and GET /v1/responses/{id} on the local text model (protocols.md section 3).

Responses are stored by default (`store`), with their conversation as plain input items (messages,
function_call, function_call_output): `previous_response_id` continues from the stored items plus the new
ones. `instructions` are never stored in that history, so they are not inherited (spec, migration rule 2).
Only the key that created a response can read or continue it; any other key gets the same 404 as for an
id that does not exist.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gwlab.local import textgen
from gwlab.local.auth import require_key
from gwlab.local.errors import APIError
from gwlab.local.routes.text_request import TextRoute, accept
from gwlab.local.store import KeyRecord, Store
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text
from gwlab.wire import responses as wire_responses
from gwlab.wire.families import FAMILIES
from gwlab.wire.tools import to_responses

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["responses"])
Key = Annotated[KeyRecord, Depends(require_key)]
ROUTE = TextRoute(FAMILIES["responses"], "input")

_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}  # what the local model reads
_OUTPUT_PARTS = {"input_text": "text"}


@dataclass(slots=True)
class ResponsesRun:
    """A validated responses request as the local gateway runs and stores it."""

    model: str
    conversation: Conversation
    plan: Plan
    items: list[dict[str, Any]]  # history + this request's input, as stored items
    echo: dict[str, Any]  # request fields the response object repeats
    store: bool
    stream: bool
    params: dict[str, str] = field(default_factory=dict)
    id: str = field(default_factory=lambda: textgen.new_id("resp_"))
    created_at: int = field(default_factory=lambda: int(time.time()))


@router.post("/responses")
async def create_response(request: Request, key: Key) -> Any:
    req = await accept(request, key, ROUTE, lambda body, model: parse(body, model, request.app.state.store, key))
    if req.stream:
        request.state.streamed = True
        return sse_response(_stream(request, req, key))
    result = await textgen.complete(req.conversation, req.plan)
    return _done(request, req, key, result, _output(result, textgen.new_id("msg_"), textgen.new_id("fc_")))


@router.get("/responses/{response_id}")
async def retrieve_response(request: Request, response_id: str, key: Key) -> dict[str, Any]:
    store: Store = request.app.state.store
    stored = store.load_response(response_id, key.id)
    if stored is None:
        raise APIError(404, f"No response with id '{response_id}'", param="response_id")
    request.state.model = stored[0].get("model")
    return stored[0]


# --- request ---------------------------------------------------------------------------------------------
def parse(body: dict[str, Any], model: str, store: Any, key: KeyRecord) -> ResponsesRun:
    """The body checked by the responses validator (gwlab.wire.responses), then refused where the local
    gateway cannot honour it; every refusal is a 400 naming the field (an unknown stored id a 404)."""
    req = wire_responses.parse_request(body)
    history: list[dict[str, Any]] = []
    if req.previous_response_id is not None:
        stored = store.load_response(req.previous_response_id, key.id)
        if stored is None:
            raise APIError(404, f"No stored response with id '{req.previous_response_id}'",
                           code="previous_response_not_found", param="previous_response_id")
        history = stored[1]
    if req.body.get("background"):
        raise APIError(400, "'background' responses are not supported by the local gateway",
                       param="background")
    if body.get("conversation") is not None:
        raise APIError(400, "'conversation' is not supported here; use previous_response_id",
                       param="conversation")
    new = _input_items(req.input) if isinstance(req.input, list) else [_message("user", req.input)]
    items = history + new
    conversation = Conversation()
    conversation.add_system(req.instructions or "")
    for item in items:
        _add(conversation, item)
    tools = textgen.function_tools(req.tools)
    plan = textgen.plan_for(req, tools, model=model)
    params = {t.name: f"tools[{i}].parameters" for i, t in enumerate(tools)}
    params[""] = req.schema_field
    text = req.body.get("text") or {}
    echo = {
        "instructions": req.instructions, "max_output_tokens": req.max_tokens, "metadata": req.metadata,
        "parallel_tool_calls": req.parallel_tool_calls, "previous_response_id": req.previous_response_id,
        "temperature": plan.temperature, "top_p": req.sampling.get("top_p", 1.0),
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": [{**to_responses(t), "description": t.description, "strict": t.strict} for t in tools],
        "text": {"format": req.format, "verbosity": text.get("verbosity") or "medium"},
    }
    return ResponsesRun(model, conversation, plan, items, echo, store=req.store, stream=req.stream,
                            params=params)


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def _input_items(raw: list[Any]) -> list[dict[str, Any]]:
    """Validated input items as stored items; an item the local gateway cannot honour is a 400 naming it."""
    items = []
    for i, item in enumerate(raw):
        where, kind = f"input[{i}]", item["type"]
        if kind == "message":
            items.append(_message(item["role"], textgen.text_of_parts(item["content"], f"{where}.content",
                                                                      _PARTS)))
        elif kind == "function_call":
            items.append({k: item[k] for k in ("type", "call_id", "name", "arguments")})
        elif kind == "function_call_output":
            output = textgen.text_of_parts(item["output"], f"{where}.output", _OUTPUT_PARTS)
            items.append({"type": "function_call_output", "call_id": item["call_id"], "output": output})
        elif kind == "item_reference":
            raise APIError(400, f"'{where}.type' item_reference is not supported by the local gateway; "
                           "continue with previous_response_id instead", param=f"{where}.type")
        else:
            raise APIError(400, f"'{where}.type' {kind!r} is not an input item the local model accepts "
                           "(message, function_call, function_call_output)", param=f"{where}.type")
    return items


def _add(conversation: Conversation, item: dict[str, Any]) -> None:
    kind = item["type"]
    if kind == "function_call":
        conversation.add_assistant("", [textgen.ToolCall(item["call_id"], item["name"], item["arguments"])])
    elif kind == "function_call_output":
        conversation.add_tool_result(item["call_id"], item["output"])
    elif item["role"] in ("system", "developer"):
        conversation.add_system(item["content"])
    elif item["role"] == "assistant":
        conversation.add_assistant(item["content"])
    else:
        conversation.add_user(item["content"])


# --- response --------------------------------------------------------------------------------------------
def _status(result: Finished) -> tuple[str, dict[str, str] | None]:
    if result.reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return "completed", None


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _output(result: Finished, message_id: str, call_id: str) -> list[dict[str, Any]]:
    status = "incomplete" if result.reason == "length" else "completed"
    if result.calls:
        return [{"id": call_id, "type": "function_call", "status": status, "call_id": c.id, "name": c.name,
                 "arguments": c.arguments} for c in result.calls]
    return [{"id": message_id, "type": "message", "role": "assistant", "status": status,
             "content": [_part(result.text)]}]


def _usage(result: Finished) -> dict[str, Any]:
    used = result.usage
    return {"input_tokens": used.prompt_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": used.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used.prompt_tokens + used.completion_tokens}


def _body(req: ResponsesRun, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
          incomplete: dict[str, str] | None = None) -> dict[str, Any]:
    """The whole response object: every field a strict client expects is present (section 3.2)."""
    return {
        "id": req.id, "object": "response", "created_at": req.created_at, "status": status,
        "background": False, "completed_at": int(time.time()) if status == "completed" else None,
        "error": None, "incomplete_details": incomplete, "model": req.model, "output": output,
        "max_tool_calls": None, "prompt_cache_key": None, "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None, "service_tier": "default", "store": req.store, "top_logprobs": 0,
        "truncation": "disabled", **({"usage": usage} if usage is not None else {}), **req.echo,
    }  # usage only once counted, and no `user`: the official schema allows neither as null


def _done(request: Request, req: ResponsesRun, key: KeyRecord, result: Finished,
          output: list[dict[str, Any]]) -> dict[str, Any]:
    """The final object; stored (with its history) before the caller can see its id."""
    status, incomplete = _status(result)
    body = _body(req, status, output, _usage(result), incomplete)
    request.state.usage = (result.usage.prompt_tokens, result.usage.completion_tokens)
    if req.store:
        history = req.items + [_stored(item) for item in output]
        request.app.state.store.save_response(req.id, key.id, body, history)
    return body


def _stored(item: dict[str, Any]) -> dict[str, Any]:
    if item["type"] == "function_call":
        return {k: item[k] for k in ("type", "call_id", "name", "arguments")}
    return _message("assistant", "".join(p["text"] for p in item["content"]))


async def _stream(request: Request, req: ResponsesRun, key: KeyRecord) -> AsyncIterator[bytes]:
    """The event sequence of section 3.6: sequence numbers from 0, the terminal event last."""
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(numbers), **fields}, event=kind)

    message_id, call_id = textgen.new_id("msg_"), textgen.new_id("fc_")
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    yield event("response.created", response=_body(req, "in_progress", [], None))
    yield event("response.in_progress", response=_body(req, "in_progress", [], None))
    opened = False
    try:
        async for item in textgen.generate(req.conversation, req.plan):
            if isinstance(item, Text | Finished) and not opened and not getattr(item, "calls", None):
                opened = True
                added = {"id": message_id, "type": "message", "role": "assistant", "status": "in_progress",
                         "content": []}
                yield event("response.output_item.added", output_index=0, item=added)
                yield event("response.content_part.added", **where, part=_part(""))
            if isinstance(item, Text):
                yield event("response.output_text.delta", **where, delta=item.text, logprobs=[])
            elif isinstance(item, CallStarted):
                added = {"id": call_id, "type": "function_call", "status": "in_progress",
                         "call_id": item.call.id, "name": item.call.name, "arguments": ""}
                yield event("response.output_item.added", output_index=0, item=added)
            elif isinstance(item, CallArguments):
                yield event("response.function_call_arguments.delta", item_id=call_id, output_index=0,
                            delta=item.text)
            elif isinstance(item, Finished):
                output = _output(item, message_id, call_id)
                if item.calls:
                    yield event("response.function_call_arguments.done", item_id=call_id, output_index=0,
                                name=item.calls[0].name, arguments=item.calls[0].arguments)
                else:
                    yield event("response.output_text.done", **where, text=item.text, logprobs=[])
                    yield event("response.content_part.done", **where, part=_part(item.text))
                yield event("response.output_item.done", output_index=0, item=output[0])
                body = _done(request, req, key, item, output)
                terminal = "response.completed" if body["status"] == "completed" else "response.incomplete"
                yield event(terminal, response=body)
    except Exception as exc:  # the status is already 200: the failure travels as the terminal event
        if not isinstance(exc, APIError):
            log.exception("responses stream failed")
        message = exc.message if isinstance(exc, APIError) else "The local model failed"
        failed = _body(req, "failed", [], None)
        failed["error"] = {"code": "server_error", "message": message}
        yield event("response.failed", response=failed)
