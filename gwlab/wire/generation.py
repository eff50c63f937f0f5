"""Request rules the three text families share: typed fields, sampling ranges, caps, content, tools, tool_choice.

chat, responses and messages each own one validator for their body (`parse_request` in their module),
which the client runs before sending and the local routes run on receipt. What the three ask alike is
written here once. Every refusal is an `InvalidRequest` whose `field` is the path the gateway's 400
names as `param` (`messages[2].role`, `tool_choice.function.name`), so client and server say the same
thing about the same body. Local models' own limits (no images, no hosted tools) are not here: they
belong to the routes, since another gateway may well accept them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from gwlab.errors import InvalidRequest
from gwlab.wire.limits import TEMPERATURE_RANGE
from gwlab.wire.models import check_model_id
from gwlab.wire.tools import ToolSpec

__all__ = [
    "MAX_STOP_SEQUENCES",
    "ToolChoice",
    "build",
    "content",
    "count",
    "json_schema",
    "model_of",
    "named_choice",
    "number",
    "object_list",
    "optional",
    "required",
    "role",
    "sampling",
    "specs",
    "stop",
    "tool_choice",
    "tools",
    "turns",
]

MAX_STOP_SEQUENCES = 16
TOP_P_RANGE = (0.0, 1.0)
PENALTY_RANGE = (-2.0, 2.0)  # chat's presence_penalty and frequency_penalty
MESSAGES_TEMPERATURE_RANGE = (0.0, 1.0)  # the messages protocol's temperature is narrower than OpenAI's
# sampling fields per family and their ranges; top_k (messages) is a count, checked beside them
SAMPLING: dict[str, dict[str, tuple[float, float]]] = {
    "chat": {"temperature": TEMPERATURE_RANGE, "top_p": TOP_P_RANGE, "presence_penalty": PENALTY_RANGE,
             "frequency_penalty": PENALTY_RANGE},
    "responses": {"temperature": TEMPERATURE_RANGE, "top_p": TOP_P_RANGE},
    "messages": {"temperature": MESSAGES_TEMPERATURE_RANGE, "top_p": TOP_P_RANGE},
}

_JSON_TYPES: dict[type, str] = {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
                                list: "an array", dict: "an object"}


# --- the body -------------------------------------------------------------------------------------


def build(validate: Callable[[dict[str, Any]], Any], fields: Mapping[str, Any], params: Mapping[str, Any],
          stream: bool) -> dict[str, Any]:
    """What a client sends: `fields`, every parameter that is not None (unset ones are omitted, as the
    spec asks) and `stream: true` for a stream, checked by the family's validator before it leaves."""
    body = {**fields, **{key: value for key, value in params.items() if value is not None}}
    if stream:
        body["stream"] = True
    validate(body)
    return body


def turns(messages: Any) -> Any:
    """A bare string as one user message; a list copied (no aliasing with the caller); else as given,
    for the validator to refuse."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return list(messages) if _is_array(messages) else messages


def model_of(body: Any) -> str:
    """The model of a body, which must be a JSON object naming one."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("body", f"must be a JSON object; got {_kind(body)}")
    return check_model_id(body.get("model"))


# --- typed fields ---------------------------------------------------------------------------------


def optional(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, path: str | None = None,
             default: Any = None) -> Any:
    """`body[name]` if present and not null, checked against a JSON type; else `default`."""
    value = body.get(name)
    if value is None:
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        kinds = (*kinds, int)
    mapped = tuple(Mapping if k is dict else Sequence if k is list else k for k in kinds)
    ok = isinstance(value, mapped) and not (isinstance(value, bool) and bool not in kinds)
    if ok and list in kinds and isinstance(value, str | bytes) and str not in kinds:
        ok = False
    if not ok:
        wanted = " or ".join(_JSON_TYPES.get(k, k.__name__) for k in kinds if k is not int or float not in kinds)
        raise InvalidRequest(path or name, f"must be {wanted}; got {_kind(value)}")
    return value


def required(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, path: str | None = None,
             hint: str = "") -> Any:
    """`body[name]`, which must be present, not null and of the JSON type `kind`."""
    if body.get(name) is None:
        raise InvalidRequest(path or name, f"required{': ' + hint if hint else ''}")
    return optional(body, name, kind, path=path)


def number(body: Mapping[str, Any], name: str, bounds: tuple[float, float]) -> float | None:
    """A number field within `bounds` (inclusive), or None when absent; booleans are not numbers."""
    value = body.get(name)
    if value is None:
        return None
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidRequest(name, f"must be a number from {low:g} to {high:g}; got {_show(value)}")
    return float(value)


def count(body: Mapping[str, Any], name: str, low: int = 1, high: int | None = None) -> int | None:
    """An integer field within bounds (token caps are counts from 1), or None when absent."""
    value: object = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
        bound = f"from {low} to {high}" if high else f"of at least {low}"
        raise InvalidRequest(name, f"must be an integer {bound}; got {_show(value)}")
    return value


def sampling(body: Mapping[str, Any], family: str) -> dict[str, float]:
    """The family's sampling fields that are set, each checked against its range."""
    values = {name: number(body, name, bounds) for name, bounds in SAMPLING[family].items()}
    return {name: value for name, value in values.items() if value is not None}


def stop(body: Mapping[str, Any], name: str, *, allow_string: bool = True) -> tuple[str, ...]:
    """Stop sequences: a non-empty string (where allowed) or an array of them, at most MAX_STOP_SEQUENCES."""
    value = body.get(name)
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) and allow_string else value
    if not _is_array(stops) or not all(isinstance(s, str) and s for s in stops):
        what = "a non-empty string or an array of them" if allow_string else "an array of non-empty strings"
        raise InvalidRequest(name, f"must be {what}")
    if len(stops) > MAX_STOP_SEQUENCES:
        raise InvalidRequest(name, f"may hold at most {MAX_STOP_SEQUENCES} sequences; got {len(stops)}")
    return tuple(stops)


def role(message: Mapping[str, Any], where: str, roles: Sequence[str], hint: str = "") -> str:
    """The message's role, which must be one of the family's `roles` (chat, responses and messages each
    name theirs once, in their module)."""
    value = message.get("role")
    if not isinstance(value, str) or value not in roles:
        raise InvalidRequest(f"{where}.role", f"must be {_listed(roles)}; got {value!r}{hint}")
    return value


def object_list(body: Mapping[str, Any], name: str, hint: str) -> Sequence[Mapping[str, Any]]:
    """A required, non-empty array of objects (chat and messages `messages`); errors name the entry."""
    value = body.get(name)
    if not _is_array(value) or not value:
        raise InvalidRequest(name, f"required: {hint}; got {_kind(value) if value is not None else 'nothing'}")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidRequest(f"{name}[{i}]", f"must be an object; got {_kind(item)}")
    return value


def content(value: Any, path: str, text_fields: Mapping[str, str]) -> None:
    """A string, or an array of typed parts; parts named in `text_fields` must carry their text string.

    Other part types (images, audio, files) are the protocol's too: whether a model reads them is the
    gateway's business, not a rule of the body."""
    if isinstance(value, str):
        return
    if value is None:
        raise InvalidRequest(path, "required")
    if not _is_array(value):
        raise InvalidRequest(path, f"must be a string or an array of content parts; got {_kind(value)}")
    for j, part in enumerate(value):
        where = f"{path}[{j}]"
        if not isinstance(part, Mapping):
            raise InvalidRequest(where, f"must be an object; got {_kind(part)}")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise InvalidRequest(f"{where}.type", "required: the part's type")
        if kind in text_fields and not isinstance(part.get(text_fields[kind]), str):
            raise InvalidRequest(f"{where}.{text_fields[kind]}", "must be a string")


def json_schema(value: Any, path: str) -> dict[str, Any]:
    """A JSON Schema object (checked against its metaschema), as structured output takes it."""
    if not isinstance(value, Mapping):
        raise InvalidRequest(path, f"must be a JSON Schema object; got {_kind(value)}")
    import jsonschema  # imported when used: see gwlab/wire/tools.py

    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as exc:
        raise InvalidRequest(path, f"is not a valid JSON Schema: {exc.message}") from None
    return dict(value)


# --- tools ----------------------------------------------------------------------------------------

Tool = ToolSpec | Mapping[str, Any]  # a function tool read, or another type kept as sent


def tools(body: Mapping[str, Any], read: Callable[[Mapping[str, Any], str], Tool | None],
          name_field: str = "name") -> list[Tool]:
    """The `tools` array, each entry read by the family's `read` (None: not a tool); function names unique.

    Tools of another type (hosted search, custom grammar tools) are kept as sent: the protocol has them,
    and it is the gateway that says whether it runs them."""
    raw = optional(body, "tools", list, default=[])
    out: list[Tool] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise InvalidRequest(where, f"must be an object; got {_kind(tool)}")
        read_tool = read(tool, where)
        if isinstance(read_tool, ToolSpec) and read_tool.name in {t.name for t in out if isinstance(t, ToolSpec)}:
            raise InvalidRequest(f"{where}.{name_field}", f"duplicate tool name {read_tool.name!r}")
        out.append(read_tool if read_tool is not None else tool)
    return out


def specs(tools: Sequence[Tool]) -> list[ToolSpec]:
    """The function tools of a `tools` list (those a tool_choice may name)."""
    return [t for t in tools if isinstance(t, ToolSpec)]


# --- tool_choice ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """What the model may do with the tools: `mode` none | auto | required | hosted (a hosted tool's type
    in `name`); `name` a function it must call; `allowed` the function names it may choose among."""

    mode: str = "auto"
    name: str | None = None
    allowed: tuple[str, ...] | None = None

    def offered(self, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools the model is shown: all of them, or the allowed ones."""
        return tuple(t for t in tools if self.allowed is None or t.name in self.allowed)


def named_choice(tools: Sequence[ToolSpec], name: Any, path: str) -> ToolChoice:
    """Call exactly the tool `name`, which must be one of `tools`."""
    if not isinstance(name, str) or name not in {t.name for t in tools}:
        raise InvalidRequest(path, f"names a tool that is not in tools: {name!r}")
    return ToolChoice("required", name)


# how each family spells a choice: the mode strings it accepts (as our modes), and where a named
# function's name and an allowed_tools list sit (paths below `tool_choice`)
@dataclass(frozen=True, slots=True)
class _Shape:
    modes: Mapping[str, str]
    named: str  # the type of a choice that names one function
    name: tuple[str, ...]  # keys from the choice object to the function name
    allowed: tuple[str, ...] | None  # keys to the allowed_tools object (holding mode and tools)
    tool_name: tuple[str, ...]  # keys from an allowed entry to its name
    strings: bool  # the modes may be sent as bare strings (OpenAI) or only as {"type": mode}
    hosted: bool  # another `type` names a hosted tool (responses)


_SHAPES = {
    "chat": _Shape({"none": "none", "auto": "auto", "required": "required"}, "function", ("function", "name"),
                   ("allowed_tools",), ("function", "name"), strings=True, hosted=False),
    "responses": _Shape({"none": "none", "auto": "auto", "required": "required"}, "function", ("name",), (),
                        ("name",), strings=True, hosted=True),
    "messages": _Shape({"none": "none", "auto": "auto", "any": "required"}, "tool", ("name",), None, ("name",),
                       strings=False, hosted=False),
}


def tool_choice(body: Mapping[str, Any], functions: Sequence[ToolSpec], family: str) -> ToolChoice:
    """The family's `tool_choice`, checked against the function tools; unset: auto with tools, else none."""
    shape, value = _SHAPES[family], body.get("tool_choice")
    if value is None:
        return ToolChoice("auto" if functions else "none")
    if isinstance(value, str) and shape.strings:
        if value not in shape.modes:
            raise InvalidRequest("tool_choice", f"must be {_listed(shape.modes)}, a function or allowed_tools; "
                                 f"got {value!r}")
        return _mode(shape.modes[value], functions)
    if not isinstance(value, Mapping):
        wanted = "a string or an object" if shape.strings else "an object with a type"
        raise InvalidRequest("tool_choice", f"must be {wanted}; got {_kind(value)}")
    kind = value.get("type")
    if not shape.strings:  # the messages spelling: {"type": mode}, each with disable_parallel_tool_use
        optional(value, "disable_parallel_tool_use", bool, path="tool_choice.disable_parallel_tool_use")
        if isinstance(kind, str) and kind in shape.modes:
            return _mode(shape.modes[kind], functions)
    if kind == shape.named:
        chosen, path = _walk(value, shape.name[:-1], "tool_choice")
        return named_choice(functions, chosen.get(shape.name[-1]), f"{path}.{shape.name[-1]}")
    if kind == "allowed_tools" and shape.allowed is not None:
        return _allowed(value, functions, shape)
    if shape.hosted and isinstance(kind, str) and kind:
        return ToolChoice("hosted", kind)
    kinds = ([] if shape.strings else list(shape.modes)) + [shape.named] + (
        ["allowed_tools"] if shape.allowed is not None else [])
    raise InvalidRequest("tool_choice.type", f"must be {_listed(kinds)}; got {kind!r}")


def _mode(mode: str, functions: Sequence[ToolSpec]) -> ToolChoice:
    if mode == "required" and not functions:
        raise InvalidRequest("tool_choice", "asks for a tool call but 'tools' holds no function tool")
    return ToolChoice(mode if functions else "none")


def _walk(value: Mapping[str, Any], keys: Sequence[str], path: str) -> tuple[Mapping[str, Any], str]:
    """The object `keys` lead to (each step a required object), and its path."""
    for key in keys:
        path = f"{path}.{key}"
        value = required(value, key, dict, path=path)
    return value, path


def _allowed(value: Mapping[str, Any], functions: Sequence[ToolSpec], shape: _Shape) -> ToolChoice:
    value, path = _walk(value, shape.allowed or (), "tool_choice")
    mode = value.get("mode")
    if mode not in ("auto", "required"):
        raise InvalidRequest(f"{path}.mode", f"must be 'auto' or 'required'; got {mode!r}")
    listed = required(value, "tools", list, path=f"{path}.tools")
    names = []
    for j, entry in enumerate(listed):
        where = f"{path}.tools[{j}]"
        if not isinstance(entry, Mapping):
            raise InvalidRequest(where, f"must be an object; got {_kind(entry)}")
        entry, at = _walk(entry, shape.tool_name[:-1], where)
        names.append(named_choice(functions, entry.get(shape.tool_name[-1]), f"{at}.{shape.tool_name[-1]}").name or "")
    return ToolChoice(mode, allowed=tuple(names))


# --- small helpers --------------------------------------------------------------------------------


def _is_array(value: Any) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return next((name for kind, name in _JSON_TYPES.items() if type(value) is kind),
                type(value).__name__)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _listed(names: Any) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
