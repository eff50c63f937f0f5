"""Function tools across the families: one normal form, argument checks, and honest outcomes.

Chat nests a tool under `function`; responses and realtime are flat; messages says `input_schema`.
`ToolSpec` is the one normal form: read any shape, validate naming the field, write any shape. The
application runs tools, never the gateway: it validates arguments first and reports a failed tool as a
failure, never as a normal result (spec, Migration rule 4). Decisions never execute tools nor produce
tool_calls; `selection_question` asks which tool fits, and the caller acts on the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gwlab.errors import InvalidRequest
from gwlab.wire import decisions
from gwlab.wire.limits import MAX_CHOICE_OPTIONS, MIN_CHOICE_OPTIONS, TOOL_NAME_PATTERN

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# jsonschema is imported where a schema is checked, not here: where rfc3987-syntax is installed (Jupyter
# brings it) importing jsonschema builds a grammar and costs ~1.3 s, which every `import gwlab` would pay

__all__ = [
    "NO_TOOL",
    "ToolOutcome",
    "ToolSpec",
    "execute",
    "outcome_to_anthropic_block",
    "outcome_to_chat_message",
    "outcome_to_responses_item",
    "parse_tool",
    "parse_tools",
    "selection_question",
    "to_anthropic",
    "to_chat",
    "to_realtime",
    "to_responses",
    "validate_arguments",
]

NO_TOOL = "none"  # the option `selection_question(..., allow_none=True)` adds
NO_TOOL_DESCRIPTION = "respond without calling any tool"
_NAME = re.compile(TOOL_NAME_PATTERN)


def _empty_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function tool, whatever shape it came in: name, description, JSON schema of its arguments."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=_empty_schema)
    strict: bool | None = None  # chat and responses only; omitted when unset


# --- reading any shape ---------------------------------------------------------------------------------


def parse_tool(tool: Mapping[str, Any] | ToolSpec, path: str = "tool") -> ToolSpec:
    """A `ToolSpec` from a chat, responses/realtime or messages tool; errors name the field under `path`."""
    if isinstance(tool, ToolSpec):
        return tool
    if not isinstance(tool, Mapping):
        raise InvalidRequest(path, f"must be a tool object; got {type(tool).__name__}")
    if "function" in tool:  # chat: {"type": "function", "function": {name, description, parameters}}
        _check_function_type(tool, path)
        inner = tool["function"]
        if not isinstance(inner, Mapping):
            raise InvalidRequest(f"{path}.function", "must be an object with name, description, parameters")
        return _spec(inner, f"{path}.function", "parameters")
    if "input_schema" in tool:  # messages: {name, description, input_schema}
        if tool.get("type", "custom") != "custom":
            got = tool["type"]
            raise InvalidRequest(f"{path}.type", f"only custom (function) tools convert; got {got!r}")
        return _spec(tool, path, "input_schema")
    _check_function_type(tool, path)  # responses and realtime: {"type": "function", name, ...} flat
    return _spec(tool, path, "parameters")


def parse_tools(tools: Iterable[Mapping[str, Any] | ToolSpec], path: str = "tools") -> list[ToolSpec]:
    """Every tool of a list, in order; names must be unique (a call names exactly one tool)."""
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise InvalidRequest(path, "must be an array of tools")
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools):
        spec = parse_tool(tool, f"{path}.{index}")
        if any(seen.name == spec.name for seen in specs):
            raise InvalidRequest(f"{path}.{index}", f"duplicate tool name {spec.name!r}")
        specs.append(spec)
    return specs


def _check_function_type(tool: Mapping[str, Any], path: str) -> None:
    if tool.get("type", "function") != "function":
        raise InvalidRequest(f"{path}.type", f"only function tools convert; got {tool.get('type')!r}")


def _spec(data: Mapping[str, Any], path: str, schema_key: str) -> ToolSpec:
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest(f"{path}.name", "must be 1 to 64 letters, digits, '_' or '-'")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidRequest(f"{path}.description", "must be a string")
    strict = data.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequest(f"{path}.strict", "must be a boolean")
    parameters = data.get(schema_key)
    parameters = _empty_schema() if parameters is None else _check_schema(parameters, f"{path}.{schema_key}")
    return ToolSpec(name, description, parameters, strict)


def _check_schema(schema: Any, path: str) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise InvalidRequest(path, "must be a JSON schema object")
    if schema.get("type", "object") != "object":
        raise InvalidRequest(f"{path}.type", "arguments are a JSON object: the type must be 'object'")
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise InvalidRequest(path, f"not a valid JSON schema: {_short(exc.message)}") from None
    return dict(schema)


# --- writing any shape ---------------------------------------------------------------------------------


def to_chat(spec: ToolSpec) -> dict[str, Any]:
    """`{"type": "function", "function": {...}}`: chat completions nest the function."""
    function: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        function["description"] = spec.description
    function["parameters"] = dict(spec.parameters)
    if spec.strict is not None:
        function["strict"] = spec.strict
    return {"type": "function", "function": function}


def to_responses(spec: ToolSpec) -> dict[str, Any]:
    """The flat function tool of responses. `strict` is always there, as the official schema requires:
    null when the caller did not set it (the server's default applies; gwlab never guesses one)."""
    return {**to_realtime(spec), "strict": spec.strict}


def to_realtime(spec: ToolSpec) -> dict[str, Any]:
    """The spec's function tool (realtime sessions): type, name, description, parameters."""
    tool: dict[str, Any] = {"type": "function", "name": spec.name}
    if spec.description is not None:
        tool["description"] = spec.description
    tool["parameters"] = dict(spec.parameters)
    return tool


def to_anthropic(spec: ToolSpec) -> dict[str, Any]:
    """The messages tool: name, description, input_schema."""
    tool: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        tool["description"] = spec.description
    tool["input_schema"] = dict(spec.parameters)
    return tool


# --- choosing a tool with a decision -----------------------------------------------------------------


def selection_question(
    tools: Iterable[Mapping[str, Any] | ToolSpec],
    instructions: str | None = None,
    *,
    allow_none: bool = False,
) -> dict[str, Any]:
    """A System One choice question whose options are the tool names, described by their descriptions.

    The answer's `choice` is the action name to run; nothing is executed and no tool_calls come back.
    `allow_none` adds the option "none" ("respond without calling any tool").
    """
    specs = parse_tools(tools)
    criteria: dict[str, str | None] = {spec.name: spec.description for spec in specs}
    if allow_none:
        if NO_TOOL in criteria:
            raise InvalidRequest("tools", f"a tool is named {NO_TOOL!r}, the option allow_none adds")
        criteria[NO_TOOL] = NO_TOOL_DESCRIPTION
    if not MIN_CHOICE_OPTIONS <= len(criteria) <= MAX_CHOICE_OPTIONS:
        hint = " (allow_none=True adds the option 'none')" if len(criteria) < MIN_CHOICE_OPTIONS else ""
        raise InvalidRequest("tools", f"tool selection takes {MIN_CHOICE_OPTIONS} to {MAX_CHOICE_OPTIONS} "
                                      f"options; got {len(criteria)}{hint}")
    question = {"type": "choice", "instructions": instructions or "Which tool should be used next?",
                "criteria": criteria}
    return decisions.question_to_wire(decisions.to_question(question, "tool"))


# --- arguments ---------------------------------------------------------------------------------------


def validate_arguments(
    tool: ToolSpec | Mapping[str, Any], arguments: str | Mapping[str, Any]
) -> dict[str, Any]:
    """The call's arguments as a dict, checked against the tool's schema before anything runs.

    Model-written `arguments` are a JSON string that may be invalid; errors name the failing path,
    e.g. `tools.get_weather.arguments.city`.
    """
    spec = parse_tool(tool)
    path = f"tools.{spec.name}.arguments"
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            message = f"the arguments of tool {spec.name!r} are not valid JSON: {exc}"
            raise InvalidRequest(path, message) from None
    elif isinstance(arguments, Mapping):
        value = dict(arguments)
    else:
        raise InvalidRequest(path, f"must be a JSON string or an object; got {type(arguments).__name__}")
    if not isinstance(value, dict):
        raise InvalidRequest(path, f"the arguments of tool {spec.name!r} must be a JSON object")
    from jsonschema import SchemaError, validators
    from jsonschema.exceptions import best_match

    try:
        validator = validators.validator_for(spec.parameters)(spec.parameters)
        error = best_match(validator.iter_errors(value))
    except SchemaError as exc:
        message = f"not a valid JSON schema: {_short(exc.message)}"
        raise InvalidRequest(f"tools.{spec.name}.parameters", message) from None
    if error is not None:
        where = ".".join([path, *(str(part) for part in error.absolute_path), *_named_property(error)])
        raise InvalidRequest(where, _short(error.message))
    return value


def _named_property(error: ValidationError) -> list[str]:
    """The property a `required` or `additionalProperties` error is about (its path stops at the parent)."""
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    if error.validator == "required":
        return [name for name in error.validator_value if name not in instance][:1]
    if error.validator == "additionalProperties" and isinstance(error.schema, Mapping):
        known, patterns = error.schema.get("properties", {}), error.schema.get("patternProperties", {})
        extra = [key for key in instance if key not in known and not any(_matches(p, key) for p in patterns)]
        return extra[:1]
    return []


def _matches(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except (re.error, TypeError):
        return False


def _short(message: str, limit: int = 200) -> str:
    """Schema messages quote the offending value: cut them, an argument may be a whole document."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


# --- outcomes -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What running one call produced: an output, or an error that must be reported as one."""

    call_id: str
    name: str
    ok: bool
    output: str = ""
    error: str | None = None

    def __post_init__(self) -> None:
        if self.ok == (self.error is not None):
            raise ValueError("a ToolOutcome has an error exactly when ok is False")

    @classmethod
    def success(cls, call_id: str, name: str, output: Any) -> ToolOutcome:
        """A result; anything but a string is sent as JSON."""
        return cls(call_id, name, True, output if isinstance(output, str) else json.dumps(output))

    @classmethod
    def failure(cls, call_id: str, name: str, error: str | BaseException) -> ToolOutcome:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return cls(call_id, name, False, error=message or "failed")

    @property
    def content(self) -> str:
        """The text the model reads: the output, or `{"error": ...}` so a failure never reads as a result."""
        return self.output if self.ok else json.dumps({"error": self.error})


def execute(tool: ToolSpec | Mapping[str, Any], call_id: str, arguments: str | Mapping[str, Any],
            function: Callable[..., Any]) -> ToolOutcome:
    """Validate the arguments, then run `function(**arguments)`; any failure becomes a failed outcome."""
    spec = parse_tool(tool)
    try:
        values = validate_arguments(spec, arguments)
    except InvalidRequest as exc:
        return ToolOutcome.failure(call_id, spec.name, f"invalid arguments: {exc}")
    try:
        return ToolOutcome.success(call_id, spec.name, function(**values))
    except Exception as exc:  # the tool's own failure is data for the model, not a crash of the loop
        return ToolOutcome.failure(call_id, spec.name, exc)


def outcome_to_chat_message(outcome: ToolOutcome) -> dict[str, Any]:
    """The chat `tool` message answering the call (chat has no error flag: the content says it)."""
    return {"role": "tool", "tool_call_id": outcome.call_id, "content": outcome.content}


def outcome_to_responses_item(outcome: ToolOutcome) -> dict[str, Any]:
    """The `function_call_output` item (responses input, and realtime `conversation.item.create`)."""
    return {"type": "function_call_output", "call_id": outcome.call_id, "output": outcome.content}


def outcome_to_anthropic_block(outcome: ToolOutcome) -> dict[str, Any]:
    """The messages `tool_result` block; a failure also carries `is_error: true`, which that protocol has."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": outcome.call_id,
                             "content": outcome.content}
    if not outcome.ok:
        block["is_error"] = True
    return block
