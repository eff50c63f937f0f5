"""The spec's chat completions → responses migration, as code: requests one way, results both ways.

Requests: `chat_request_to_responses` applies the spec's table (messages → input items, leading system
and developer messages → `instructions`, nested tools and `response_format` → flat, ...). Fields the
table does not cover are passed through unchanged rather than dropped: most share their name in both
APIs (`temperature`, `metadata`, `store`, ...), and silently losing one would change the request's
meaning without a trace. `unmapped_request_fields` lists what went through unmapped or was left out
(a message's `name`), so a notebook can show it; the body itself stays a clean responses body.

Results: output items are traversed by type (spec, Migration rule 1); an item type chat cannot carry
is kept under `gwlab_unmapped_items`, never dropped, and comes back when converting the other way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.wire import tools
from gwlab.wire.families import read_usage

__all__ = [
    "MIGRATION_TABLE",
    "chat_request_to_responses",
    "chat_result_to_responses",
    "responses_result_to_chat",
    "unmapped_request_fields",
]

# gateway-api.md, "Migration rules from chat completions to responses", row for row
MIGRATION_TABLE: list[tuple[str, str]] = [
    ("POST /chat/completions", "POST /responses"),
    ("messages", "input (input items)"),
    ("system or developer messages", "instructions or typed input"),
    ("max_completion_tokens", "max_output_tokens"),
    ("response_format", "text.format"),
    ("choices[].message", "output[] items, traversed by item and content type"),
    ("tool_calls", "function_call item"),
    ("tool message with tool_call_id", "function_call_output item with call_id"),
    ("Chat delta chunks", "response.* events"),
    ("usage.prompt_tokens", "usage.input_tokens"),
    ("usage.completion_tokens", "usage.output_tokens"),
    ("usage.total_tokens", "usage.total_tokens"),
    ("finish_reason", "response, item and content status or error information"),
    ("web_search_options", "a web search tool in tools"),
]

# request fields spelled the same in both APIs (protocols.md §2.1, §3.1)
_SAME_NAME = frozenset({
    "model", "stream", "temperature", "top_p", "parallel_tool_calls", "metadata", "store", "user",
    "safety_identifier", "prompt_cache_key", "service_tier", "top_logprobs",
})
_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "refusal"})
_UNMAPPED = "gwlab_unmapped_items"


# --- requests -------------------------------------------------------------------------------------------


def chat_request_to_responses(body: Mapping[str, Any]) -> dict[str, Any]:
    """The responses request equivalent to a chat completions request (the spec's migration table).

    Leading system/developer messages become `instructions` (joined by blank lines); later ones stay
    typed input items where they were. Unknown top-level fields are passed through unchanged (see the
    module docstring and `unmapped_request_fields`). Malformed messages raise `InvalidRequest`.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("", "the chat request must be a JSON object")
    out: dict[str, Any] = {}
    for key, value in body.items():
        rule = _REQUEST_RULES.get(key)
        if rule is None:
            out[key] = value
        else:
            rule(value, out)
    return out


def unmapped_request_fields(body: Mapping[str, Any]) -> list[str]:
    """Fields `chat_request_to_responses` passed through without an equivalent, or left out, as paths."""
    notes = [key for key in body if key not in _REQUEST_RULES and key not in _SAME_NAME]
    options = body.get("stream_options")
    if isinstance(options, Mapping) and "include_usage" in options:
        notes.append("stream_options.include_usage")  # responses always report usage at the end
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and message.get("role") in _ROLE_ITEMS:
            notes.extend(f"messages.{index}.{key}" for key in message if key not in _MESSAGE_FIELDS)
    return notes


def _messages(value: Any, out: dict[str, Any]) -> None:
    if not isinstance(value, list):
        raise InvalidRequest("messages", "must be an array of messages")
    instructions: list[str] = []
    items: list[Any] = []
    for index, message in enumerate(value):
        path = f"messages.{index}"
        if not isinstance(message, Mapping):
            raise InvalidRequest(path, "must be a message object")
        role = message.get("role")
        if role in ("system", "developer") and len(instructions) == index:  # still leading
            instructions.append(_text(message.get("content"), f"{path}.content"))
        elif role in _ROLE_ITEMS:
            items.extend(_ROLE_ITEMS[role](message, path))
        else:
            items.append(dict(message))  # a role the table does not know: kept as it was
    if instructions:
        out["instructions"] = "\n\n".join(instructions)
    out["input"] = items


def _instruction_item(message: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    return [{"role": message["role"], "content": _text(message.get("content"), f"{path}.content")}]


def _user_item(message: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        content = [_user_part(part) for part in content]
    elif not isinstance(content, str):
        raise InvalidRequest(f"{path}.content", "must be a string or an array of content parts")
    return [{"role": "user", "content": content}]


def _user_part(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": part.get("text")}
    if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
        image = part["image_url"]
        return {"type": "input_image", "image_url": image.get("url"),
                **({"detail": image["detail"]} if "detail" in image else {})}
    if kind == "file" and isinstance(part.get("file"), Mapping):
        return {"type": "input_file", **part["file"]}
    return dict(part)  # input_audio and newer parts: kept as they were


def _assistant_items(message: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content, refusal = message.get("content"), message.get("refusal")
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        parts = [_assistant_part(part) for part in content if isinstance(part, Mapping)]
    elif isinstance(content, str) and content:
        parts = [{"type": "output_text", "text": content}]
    elif content is not None and not isinstance(content, str):
        raise InvalidRequest(f"{path}.content", "must be a string, an array of content parts or null")
    if isinstance(refusal, str):
        parts.append({"type": "refusal", "refusal": refusal})
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "output_text"
        items.append({"role": "assistant", "content": parts[0]["text"] if only_text else parts})
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise InvalidRequest(f"{path}.tool_calls", "must be an array of tool calls")
    items.extend(_call_item(call, f"{path}.tool_calls.{index}") for index, call in enumerate(calls))
    return items


def _assistant_part(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") == "refusal":
        return {"type": "refusal", "refusal": part.get("refusal")}
    return {"type": "output_text", "text": part.get("text")}


def _call_item(call: Any, path: str) -> dict[str, Any]:
    if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
        raise InvalidRequest(path, "a tool call needs an id")
    kind = call.get("type", "function")
    inner = call.get(kind)
    if kind not in ("function", "custom") or not isinstance(inner, Mapping):
        raise InvalidRequest(f"{path}.type", "must be a function or custom tool call")
    if kind == "custom":
        return {"type": "custom_tool_call", "call_id": call["id"], "name": inner.get("name"),
                "input": inner.get("input")}
    return {"type": "function_call", "call_id": call["id"], "name": inner.get("name"),
            "arguments": inner.get("arguments")}


def _tool_output_item(message: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest(f"{path}.tool_call_id", "required: the id of the tool call this message answers")
    return [{"type": "function_call_output", "call_id": call_id,
             "output": _text(message.get("content"), f"{path}.content")}]


_ROLE_ITEMS: dict[str, Callable[[Mapping[str, Any], str], list[dict[str, Any]]]] = {
    "system": _instruction_item, "developer": _instruction_item, "user": _user_item,
    "assistant": _assistant_items, "tool": _tool_output_item,
}


def _text(content: Any, path: str) -> str:
    """A string content, or the text parts of an array joined (system, developer and tool messages)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    raise InvalidRequest(path, "must be a string or an array of text parts")


def _max_completion_tokens(value: Any, out: dict[str, Any]) -> None:
    out["max_output_tokens"] = value


def _max_tokens(value: Any, out: dict[str, Any]) -> None:
    out.setdefault("max_output_tokens", value)  # the older name yields to max_completion_tokens


def _response_format(value: Any, out: dict[str, Any]) -> None:
    if not isinstance(value, Mapping):
        raise InvalidRequest("response_format", "must be an object with a type")
    if value.get("type") == "json_schema":  # nested under json_schema in chat, flat in text.format
        inner = value.get("json_schema")
        if not isinstance(inner, Mapping):
            raise InvalidRequest("response_format.json_schema", "required for type json_schema")
        out.setdefault("text", {})["format"] = {"type": "json_schema", **inner}
    else:
        out.setdefault("text", {})["format"] = dict(value)


def _verbosity(value: Any, out: dict[str, Any]) -> None:
    out.setdefault("text", {})["verbosity"] = value


def _reasoning_effort(value: Any, out: dict[str, Any]) -> None:
    out.setdefault("reasoning", {})["effort"] = value


def _tools(value: Any, out: dict[str, Any]) -> None:
    if not isinstance(value, list):
        raise InvalidRequest("tools", "must be an array of tools")
    out.setdefault("tools", []).extend(_flat_tool(tool, f"tools.{index}") for index, tool in enumerate(value))


def _flat_tool(tool: Any, path: str) -> Any:
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        return tools.to_responses(tools.parse_tool(tool, path))
    if isinstance(tool, Mapping) and isinstance(tool.get("custom"), Mapping):
        return {"type": "custom", **tool["custom"]}
    return tool


def _tool_choice(value: Any, out: dict[str, Any]) -> None:
    out["tool_choice"] = _flat_choice(value)


def _flat_choice(value: Any) -> Any:
    """`{"type": "function", "function": {"name": n}}` → `{"type": "function", "name": n}`, and the like."""
    if not isinstance(value, Mapping):
        return value  # "auto" | "none" | "required"
    kind = value.get("type")
    if kind in ("function", "custom") and isinstance(value.get(kind), Mapping):
        return {"type": kind, "name": value[kind].get("name")}
    if kind == "allowed_tools" and isinstance(value.get("allowed_tools"), Mapping):
        allowed = value["allowed_tools"]
        return {"type": "allowed_tools", "mode": allowed.get("mode"),
                "tools": [_flat_choice(tool) for tool in allowed.get("tools") or []]}
    return dict(value)


def _web_search_options(value: Any, out: dict[str, Any]) -> None:
    options = value if isinstance(value, Mapping) else {}
    tool: dict[str, Any] = {"type": "web_search"}
    if "search_context_size" in options:
        tool["search_context_size"] = options["search_context_size"]
    location = options.get("user_location")
    if isinstance(location, Mapping):  # chat nests the fields under "approximate"; responses is flat
        inner = location.get("approximate")
        tool["user_location"] = {"type": location.get("type", "approximate"),
                                 **(inner if isinstance(inner, Mapping) else {})}
    out.setdefault("tools", []).append(tool)


def _stream_options(value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        kept = {key: item for key, item in value.items() if key != "include_usage"}
        if kept:
            out["stream_options"] = kept
    else:
        out["stream_options"] = value


_REQUEST_RULES: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "messages": _messages,
    "max_completion_tokens": _max_completion_tokens,
    "max_tokens": _max_tokens,
    "response_format": _response_format,
    "verbosity": _verbosity,
    "reasoning_effort": _reasoning_effort,
    "tools": _tools,
    "tool_choice": _tool_choice,
    "web_search_options": _web_search_options,
    "stream_options": _stream_options,
}


# --- results ------------------------------------------------------------------------------------------

_FINISH_BY_INCOMPLETE: dict[str | None, str] = {"max_output_tokens": "length", "content_filter": "content_filter"}
_INCOMPLETE_BY_FINISH: dict[str | None, str | None] = {
    reason: detail for detail, reason in _FINISH_BY_INCOMPLETE.items()}


def responses_result_to_chat(response: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion presenting a responses result: texts joined into `content`, calls as tool_calls.

    Items chat cannot carry (reasoning, web search calls, unknown types, unknown message parts) are kept
    under `gwlab_unmapped_items`. A status finish_reason cannot express (failed, cancelled, in
    progress) gives `finish_reason: null` plus `gwlab_unmapped_status` with the status, details and error.
    """
    texts: list[str] = []
    refusals: list[str] = []
    annotations: list[Any] = []
    calls: list[dict[str, Any]] = []
    unmapped: list[Any] = []
    output = response.get("output")
    for item in output if isinstance(output, list) else []:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            _read_message(item, texts, refusals, annotations, unmapped)
        elif kind == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
        elif kind == "custom_tool_call":
            calls.append({"id": item.get("call_id"), "type": "custom",
                          "custom": {"name": item.get("name"), "input": item.get("input")}})
        else:
            unmapped.append(item)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None,
                               "refusal": "".join(refusals) if refusals else None}
    if annotations:
        message["annotations"] = annotations
    if calls:
        message["tool_calls"] = calls
    finish = _finish_reason(response, bool(calls))
    chat: dict[str, Any] = {
        "id": response.get("id"), "object": "chat.completion", "created": response.get("created_at"),
        "model": response.get("model"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": _chat_usage(response.get("usage")),
    }
    if finish is None:
        chat["gwlab_unmapped_status"] = {key: response.get(key)
                                         for key in ("status", "incomplete_details", "error")}
    if unmapped:
        chat[_UNMAPPED] = unmapped
    return chat


def _read_message(item: Mapping[str, Any], texts: list[str], refusals: list[str], annotations: list[Any],
                  unmapped: list[Any]) -> None:
    left: list[Any] = []
    for part in item.get("content") or []:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "output_text" and isinstance(part.get("text"), str):
            offset = sum(map(len, texts))  # chat has one content string: shift citation indexes into it
            annotations.extend(_nested_annotation(a, offset) for a in part.get("annotations") or [])
            texts.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            refusals.append(part["refusal"])
        else:
            left.append(part)
    if left:
        unmapped.append({**item, "content": left})


def _nested_annotation(annotation: Any, offset: int) -> Any:
    if not isinstance(annotation, Mapping) or annotation.get("type") != "url_citation":
        return annotation
    citation = {key: value for key, value in annotation.items() if key != "type"}
    for key in ("start_index", "end_index"):
        if isinstance(citation.get(key), int):
            citation[key] += offset
    return {"type": "url_citation", "url_citation": citation}


def _finish_reason(response: Mapping[str, Any], has_calls: bool) -> str | None:
    status = response.get("status", "completed")  # a gateway that omits status answered in full
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        return _FINISH_BY_INCOMPLETE.get(details.get("reason") if isinstance(details, Mapping) else None)
    return None


def _chat_usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, Mapping):
        return None
    return _usage(usage, ("input_tokens", "output_tokens"), ("prompt_tokens", "completion_tokens"))


def _usage(usage: Mapping[str, Any], source: tuple[str, str], target: tuple[str, str]) -> dict[str, Any]:
    """Token counts renamed; the details objects travel whole (`cached_tokens` and
    `reasoning_tokens` are spelled alike in both APIs)."""
    given_in, given_out = read_usage(usage)
    total = usage.get("total_tokens")
    if total is None and isinstance(given_in, int) and isinstance(given_out, int):
        total = given_in + given_out
    out: dict[str, Any] = {target[0]: given_in, target[1]: given_out, "total_tokens": total}
    for src, dst in zip(source, target, strict=True):
        details = usage.get(f"{src}_details")
        if isinstance(details, Mapping):
            out[f"{dst}_details"] = dict(details)
    return out


def chat_result_to_responses(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A responses object presenting a chat completion: the first choice's message as output items.

    Items kept under `gwlab_unmapped_items` by `responses_result_to_chat` return to `output`; choices
    beyond the first (chat's `n`) have no responses equivalent and are kept under `gwlab_unmapped_choices`.
    """
    choices = got if isinstance(got := chat.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
    message = got if isinstance(got := first.get("message"), Mapping) else {}
    finish = first.get("finish_reason")
    status = "completed" if finish in ("stop", "tool_calls", "function_call") else "incomplete"
    reason = _INCOMPLETE_BY_FINISH.get(finish)
    chat_id = chat.get("id") or "chat"
    output: list[Any] = []
    parts = _output_parts(message)
    if parts:
        output.append({"id": f"msg_{chat_id}", "type": "message", "role": "assistant", "status": status,
                       "content": parts})
    unmapped: list[Any] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        item = _call_output_item(call)
        (output if item is not None else unmapped).append(item if item is not None else call)
    output.extend(chat.get(_UNMAPPED) or [])
    response: dict[str, Any] = {
        "id": chat.get("id"), "object": "response", "created_at": chat.get("created"), "status": status,
        "model": chat.get("model"), "error": None,
        "incomplete_details": {"reason": reason} if status == "incomplete" and reason else None,
        "output": output,
        "usage": _responses_usage(chat.get("usage")),
    }
    if len(choices) > 1:
        response["gwlab_unmapped_choices"] = choices[1:]
    if unmapped:
        response[_UNMAPPED] = unmapped
    return response


def _output_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "output_text", "text": content,
                      "annotations": [_flat_annotation(a) for a in message.get("annotations") or []]})
    elif isinstance(content, list):
        parts.extend({"type": "output_text", "text": p["text"], "annotations": []}
                     for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    if isinstance(message.get("refusal"), str):
        parts.append({"type": "refusal", "refusal": message["refusal"]})
    return parts


def _flat_annotation(annotation: Any) -> Any:
    if isinstance(annotation, Mapping) and isinstance(annotation.get("url_citation"), Mapping):
        return {"type": "url_citation", **annotation["url_citation"]}
    return annotation


def _call_output_item(call: Any) -> dict[str, Any] | None:
    if not isinstance(call, Mapping):
        return None
    call_id = call.get("id")
    if isinstance(call.get("function"), Mapping):
        function = call["function"]
        return {"id": f"fc_{call_id}", "type": "function_call", "status": "completed", "call_id": call_id,
                "name": function.get("name"), "arguments": function.get("arguments")}
    if isinstance(call.get("custom"), Mapping):
        custom = call["custom"]
        return {"id": f"ctc_{call_id}", "type": "custom_tool_call", "status": "completed", "call_id": call_id,
                "name": custom.get("name"), "input": custom.get("input")}
    return None


def _responses_usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, Mapping):
        return None
    return _usage(usage, ("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens"))
