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
from gwlab.local.auth import require_key, require_model
from gwlab.local.body import field as body_field
from gwlab.local.body import read_json
from gwlab.local.errors import APIError
from gwlab.local.store import KeyRecord
from gwlab.local.streaming import sse, sse_response
from gwlab.local.textgen import CallArguments, CallStarted, Conversation, Finished, Plan, Text, ToolChoice
from gwlab.wire.tools import ToolSpec, to_responses

log = logging.getLogger("gwlab.local")
router = APIRouter(tags=["responses"])
Key = Annotated[KeyRecord, Depends(require_key)]

ROLES = ("user", "system", "developer", "assistant")
_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_OUTPUT_PARTS = {"input_text": "text"}
MAX_METADATA_KEYS = 16


@dataclass(slots=True)
class ResponsesRequest:
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
    body = await read_json(request)
    info = require_model(key, body.get("model"), "responses")
    request.state.model = info.id
    req = parse(body, info.id, request.app.state.store, key)
    await textgen.prepare(req.plan, req.params, req.conversation, "input")
    if req.stream:
        request.state.streamed = True
        return sse_response(_stream(request, req, key))
    result = await textgen.complete(req.conversation, req.plan)
    return _done(request, req, key, result, _output(result, textgen.new_id("msg_"), textgen.new_id("fc_")))


@router.get("/responses/{response_id}")
async def retrieve_response(request: Request, response_id: str, key: Key) -> dict[str, Any]:
    stored = request.app.state.store.load_response(response_id, key.id)
    if stored is None:
        raise APIError(404, f"No response with id '{response_id}'", param="response_id")
    request.state.model = stored[0].get("model")
    return stored[0]


# --- request ---------------------------------------------------------------------------------------------
def parse(body: dict[str, Any], model: str, store: Any, key: KeyRecord) -> ResponsesRequest:
    """Every field the local model honours, checked; a wrong one is a 400 naming it."""
    history: list[dict[str, Any]] = []
    previous = body_field(body, "previous_response_id", str)
    if previous is not None:
        stored = store.load_response(previous, key.id)
        if stored is None:
            raise APIError(404, f"No stored response with id '{previous}'",
                           code="previous_response_not_found", param="previous_response_id")
        history = stored[1]
    raw = body.get("input")
    if not isinstance(raw, str | list):
        raise APIError(400, "'input' must be a string or an array of input items", param="input")
    items = history + (_input_items(raw) if isinstance(raw, list) else [_message("user", raw)])
    instructions = body_field(body, "instructions", str)
    conversation = Conversation()
    conversation.add_system(instructions or "")
    for item in items:
        _add(conversation, item)

    plan, params = Plan(call_prefix="call_", model=model), {}
    tools = [_tool(t, i) for i, t in enumerate(body_field(body, "tools", list, default=[]))]
    textgen.check_tools(tools, "tools")
    plan.tools, plan.choice = _tool_choice(body.get("tool_choice"), tools)
    params.update({t.name: f"tools[{i}].parameters" for i, t in enumerate(tools)})
    text = body_field(body, "text", dict, default={})
    fmt = body_field(text, "format", dict, default={"type": "text"}, path="text.format")
    plan.schema, params[""] = _format(fmt)
    limit = textgen.check_count(body.get("max_output_tokens"), "max_output_tokens")
    plan.max_tokens = limit or plan.max_tokens
    temperature = textgen.check_number(body.get("temperature"), "temperature", 0, 2)
    plan.temperature = plan.temperature if temperature is None else temperature
    top_p = textgen.check_number(body.get("top_p"), "top_p", 0, 1)  # echoed; the engine samples its own way
    metadata = _metadata(body_field(body, "metadata", dict, default={}))
    parallel = body_field(body, "parallel_tool_calls", bool, default=True)
    if body_field(body, "background", bool):
        raise APIError(400, "'background' responses are not supported by the local gateway",
                       param="background")
    if body.get("conversation") is not None:
        raise APIError(400, "'conversation' is not supported here; use previous_response_id",
                       param="conversation")
    if body.get("truncation") not in (None, "auto", "disabled"):
        raise APIError(400, "'truncation' must be 'auto' or 'disabled'", param="truncation")
    body_field(body, "reasoning", dict)  # accepted; a 270M base model does not reason
    body_field(body, "include", list)
    echo = {
        "instructions": instructions, "max_output_tokens": limit, "metadata": metadata,
        "parallel_tool_calls": parallel, "previous_response_id": previous, "temperature": plan.temperature,
        "top_p": 1.0 if top_p is None else top_p, "tool_choice": body.get("tool_choice") or "auto",
        "tools": [{**to_responses(t), "description": t.description, "strict": t.strict} for t in tools],
        "text": {"format": fmt, "verbosity": text.get("verbosity") or "medium"},
    }
    return ResponsesRequest(model, conversation, plan, items, echo,
                            store=body_field(body, "store", bool, default=True),
                            stream=bool(body_field(body, "stream", bool)), params=params)


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def _input_items(raw: list[Any]) -> list[dict[str, Any]]:
    """The input array as stored items; an item the local gateway cannot honour is a 400 naming it."""
    items = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise APIError(400, f"'{where}' must be an object", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                raise APIError(400, f"'{where}.role' must be one of {', '.join(ROLES)}, got {role!r}",
                               param=f"{where}.role")
            if item.get("content") is None:
                raise APIError(400, f"Missing required field '{where}.content'", param=f"{where}.content")
            items.append(_message(role, textgen.text_of_parts(item["content"], f"{where}.content", _PARTS)))
        elif kind == "function_call":
            items.append({"type": "function_call",
                          "call_id": body_field(item, "call_id", str, required=True, path=f"{where}.call_id"),
                          "name": body_field(item, "name", str, required=True, path=f"{where}.name"),
                          "arguments": body_field(item, "arguments", str, required=True,
                                                  path=f"{where}.arguments")})
        elif kind == "function_call_output":
            call_id = body_field(item, "call_id", str, required=True, path=f"{where}.call_id")
            if item.get("output") is None:
                raise APIError(400, f"Missing required field '{where}.output'", param=f"{where}.output")
            output = textgen.text_of_parts(item["output"], f"{where}.output", _OUTPUT_PARTS)
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
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


def _tool(tool: Any, i: int) -> ToolSpec:
    where = f"tools[{i}]"
    if not isinstance(tool, dict):
        raise APIError(400, f"'{where}' must be an object", param=where)
    if tool.get("type") != "function":
        raise APIError(400, f"'{where}.type' {tool.get('type')!r} is not available on the local model "
                       "(function tools only)", param=f"{where}.type")
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
        return tuple(tools), textgen.named_choice(tools, choice.get("name"), "tool_choice.name")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        mode = choice.get("mode")
        if mode not in ("auto", "required"):
            raise APIError(400, "'tool_choice.mode' must be 'auto' or 'required'", param="tool_choice.mode")
        listed = body_field(choice, "tools", list, required=True, path="tool_choice.tools")
        names = [t.get("name") if isinstance(t, dict) else None for t in listed]
        for j, name in enumerate(names):
            textgen.named_choice(tools, name, f"tool_choice.tools[{j}].name")
        return tuple(t for t in tools if t.name in names), ToolChoice(mode)
    raise APIError(400, "'tool_choice' must be 'none', 'auto', 'required', a function or allowed_tools",
                   param="tool_choice")


def _format(fmt: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    kind = fmt.get("type")
    if kind == "text":
        return None, ""
    if kind == "json_object":
        return {"type": "object"}, "text.format"
    if kind == "json_schema":
        body_field(fmt, "name", str, required=True, path="text.format.name")
        schema = body_field(fmt, "schema", dict, required=True, path="text.format.schema")
        return textgen.check_schema(schema, "text.format.schema"), "text.format.schema"
    raise APIError(400, "'text.format.type' must be text, json_object or json_schema",
                   param="text.format.type")


def _metadata(metadata: dict[str, Any]) -> dict[str, str]:
    if len(metadata) > MAX_METADATA_KEYS or not all(isinstance(v, str) for v in metadata.values()):
        raise APIError(400, f"'metadata' holds at most {MAX_METADATA_KEYS} string values", param="metadata")
    return metadata


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
    return {"input_tokens": used.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": used.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used.prompt_tokens + used.completion_tokens}


def _body(req: ResponsesRequest, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
          incomplete: dict[str, str] | None = None) -> dict[str, Any]:
    """The whole response object: every field a strict client expects is present (section 3.2)."""
    return {
        "id": req.id, "object": "response", "created_at": req.created_at, "status": status,
        "background": False, "completed_at": int(time.time()) if status == "completed" else None,
        "error": None, "incomplete_details": incomplete, "model": req.model, "output": output,
        "max_tool_calls": None, "prompt_cache_key": None, "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None, "service_tier": "default", "store": req.store, "top_logprobs": 0,
        "truncation": "disabled", "user": None, "usage": usage, **req.echo,
    }


def _done(request: Request, req: ResponsesRequest, key: KeyRecord, result: Finished,
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


async def _stream(request: Request, req: ResponsesRequest, key: KeyRecord) -> AsyncIterator[bytes]:
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
                                arguments=item.calls[0].arguments)
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
