"""Realtime wire facts, pure: event type names, the session configuration and client-event checks.

Shared by the client (to refuse a bad event before it leaves) and the local gateway (to answer one with
an `error` event). The session configuration is accepted nested under `session` (as the SDKs send it,
protocols.md §6.3) and at the top level of `session.update` (as the spec's table reads); an error names
the parameter the way it was sent (`session.temperature` or `temperature`).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Mapping
from typing import Any

from gwlab.errors import InvalidEvent, InvalidRequest
from gwlab.wire.limits import (
    AUDIO_FORMATS,
    MAX_OUTPUT_TOKENS_DEFAULT,
    MAX_OUTPUT_TOKENS_RANGE,
    MODALITIES,
    REALTIME_MAX_ITEM_ID_LENGTH,
    REALTIME_MAX_METADATA_KEYS,
    RESPONSE_CONVERSATIONS,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_RANGE,
    TOOL_CHOICES,
    TURN_DETECTION_TYPES,
    VAD_PREFIX_PADDING_MS_DEFAULT,
    VAD_PREFIX_PADDING_MS_RANGE,
    VAD_SILENCE_DURATION_MS_DEFAULT,
    VAD_SILENCE_DURATION_MS_RANGE,
    VAD_THRESHOLD_DEFAULT,
    VAD_THRESHOLD_RANGE,
    VOICES,
)
from gwlab.wire.tools import parse_tool

# --- event types (protocols.md §6.3, §6.4) ----------------------------------------------------------------
SESSION_UPDATE = "session.update"
INPUT_AUDIO_BUFFER_APPEND = "input_audio_buffer.append"
INPUT_AUDIO_BUFFER_COMMIT = "input_audio_buffer.commit"
INPUT_AUDIO_BUFFER_CLEAR = "input_audio_buffer.clear"
CONVERSATION_ITEM_CREATE = "conversation.item.create"
CONVERSATION_ITEM_RETRIEVE = "conversation.item.retrieve"
CONVERSATION_ITEM_TRUNCATE = "conversation.item.truncate"
CONVERSATION_ITEM_DELETE = "conversation.item.delete"
RESPONSE_CREATE = "response.create"
RESPONSE_CANCEL = "response.cancel"
TRANSCRIPTION_SESSION_UPDATE = "transcription_session.update"
OUTPUT_AUDIO_BUFFER_CLEAR = "output_audio_buffer.clear"

ERROR = "error"
SESSION_CREATED = "session.created"
SESSION_UPDATED = "session.updated"
CONVERSATION_CREATED = "conversation.created"
CONVERSATION_ITEM_CREATED = "conversation.item.created"
CONVERSATION_ITEM_RETRIEVED = "conversation.item.retrieved"
CONVERSATION_ITEM_TRUNCATED = "conversation.item.truncated"
CONVERSATION_ITEM_DELETED = "conversation.item.deleted"
INPUT_TRANSCRIPTION_COMPLETED = "conversation.item.input_audio_transcription.completed"
INPUT_TRANSCRIPTION_FAILED = "conversation.item.input_audio_transcription.failed"
INPUT_AUDIO_BUFFER_COMMITTED = "input_audio_buffer.committed"
INPUT_AUDIO_BUFFER_CLEARED = "input_audio_buffer.cleared"
INPUT_AUDIO_BUFFER_SPEECH_STARTED = "input_audio_buffer.speech_started"
INPUT_AUDIO_BUFFER_SPEECH_STOPPED = "input_audio_buffer.speech_stopped"
RESPONSE_CREATED = "response.created"
RESPONSE_DONE = "response.done"
RESPONSE_OUTPUT_ITEM_ADDED = "response.output_item.added"
RESPONSE_OUTPUT_ITEM_DONE = "response.output_item.done"
RESPONSE_CONTENT_PART_ADDED = "response.content_part.added"
RESPONSE_CONTENT_PART_DONE = "response.content_part.done"
RESPONSE_TEXT_DELTA = "response.text.delta"
RESPONSE_TEXT_DONE = "response.text.done"
RESPONSE_AUDIO_DELTA = "response.audio.delta"
RESPONSE_AUDIO_DONE = "response.audio.done"
RESPONSE_AUDIO_TRANSCRIPT_DELTA = "response.audio_transcript.delta"
RESPONSE_AUDIO_TRANSCRIPT_DONE = "response.audio_transcript.done"
RESPONSE_FUNCTION_CALL_ARGUMENTS_DELTA = "response.function_call_arguments.delta"
RESPONSE_FUNCTION_CALL_ARGUMENTS_DONE = "response.function_call_arguments.done"
RATE_LIMITS_UPDATED = "rate_limits.updated"
OUTPUT_AUDIO_BUFFER_STARTED = "output_audio_buffer.started"
OUTPUT_AUDIO_BUFFER_STOPPED = "output_audio_buffer.stopped"
OUTPUT_AUDIO_BUFFER_CLEARED = "output_audio_buffer.cleared"

# client event type -> fields it must carry (the rest of its checks live in `check_client_event`)
CLIENT_EVENTS: dict[str, tuple[str, ...]] = {
    SESSION_UPDATE: (),
    INPUT_AUDIO_BUFFER_APPEND: ("audio",),
    INPUT_AUDIO_BUFFER_COMMIT: (),
    INPUT_AUDIO_BUFFER_CLEAR: (),
    CONVERSATION_ITEM_CREATE: ("item",),
    CONVERSATION_ITEM_RETRIEVE: ("item_id",),
    CONVERSATION_ITEM_TRUNCATE: ("item_id", "content_index", "audio_end_ms"),
    CONVERSATION_ITEM_DELETE: ("item_id",),
    RESPONSE_CREATE: (),
    RESPONSE_CANCEL: (),
    TRANSCRIPTION_SESSION_UPDATE: ("session",),
    OUTPUT_AUDIO_BUFFER_CLEAR: (),
}

# --- statuses and enums (spec: States and transitions; protocols.md §6.5) ---------------------------------
ITEM_TYPES = ("message", "function_call", "function_call_output")
ITEM_STATUSES = ("completed", "in_progress", "incomplete")
ROLES = ("user", "assistant", "system")
RESPONSE_STATUSES = ("in_progress", "completed", "cancelled", "failed", "incomplete")
SESSION_STATUSES = ("active", "ended", "error")
# content part types a client may put in an item, per role
CONTENT_TYPES: dict[str, dict[str, str | None]] = {  # type -> its text field (None: audio part)
    "user": {"input_text": "text", "input_audio": None, "item_reference": "id"},
    "system": {"input_text": "text"},
    "assistant": {"text": "text", "audio": None},
}

# error codes of the `error` event (OpenAI's names where it has one)
INVALID_JSON = "invalid_json"
INVALID_EVENT = "invalid_event"
UNKNOWN_EVENT = "unknown_event_type"
MISSING_PARAMETER = "missing_required_parameter"
UNKNOWN_PARAMETER = "unknown_parameter"
INVALID_TYPE = "invalid_type"
INVALID_VALUE = "invalid_value"

# fields of the session (protocols.md §6.2) that are accepted and not acted upon
_IGNORED_SESSION_FIELDS = frozenset({"id", "object", "model", "expires_at", "input_audio_noise_reduction",
                                     "speed", "tracing", "client_secret", "include"})
_SESSION_FIELDS = frozenset({"modalities", "instructions", "voice", "input_audio_format",
                             "output_audio_format", "input_audio_transcription", "turn_detection", "tools",
                             "tool_choice", "temperature", "max_output_tokens", "max_response_output_tokens"})
_RESPONSE_FIELDS = frozenset({"modalities", "instructions", "voice", "output_audio_format", "tools",
                              "tool_choice", "temperature", "max_output_tokens", "max_response_output_tokens",
                              "conversation", "metadata", "input"})
_TRANSCRIPTION_FIELDS = frozenset({"model", "language", "prompt", "enabled"})
_VAD_FIELDS = frozenset({"type", "threshold", "prefix_padding_ms", "silence_duration_ms", "create_response",
                         "interrupt_response"})
_ENVELOPE = frozenset({"type", "event_id", "timestamp"})


def default_turn_detection() -> dict[str, Any]:
    return {"type": "server_vad", "threshold": VAD_THRESHOLD_DEFAULT,
            "prefix_padding_ms": VAD_PREFIX_PADDING_MS_DEFAULT,
            "silence_duration_ms": VAD_SILENCE_DURATION_MS_DEFAULT,
            "create_response": True, "interrupt_response": True}


def default_session() -> dict[str, Any]:
    """The spec's defaults (Limits; Model configuration parameters; VAD parameters)."""
    return {
        "modalities": ["text"], "instructions": "", "voice": "alloy",
        "input_audio_format": "pcm16", "output_audio_format": "pcm16", "input_audio_transcription": None,
        "turn_detection": default_turn_detection(), "tools": [], "tool_choice": "auto",
        "temperature": TEMPERATURE_DEFAULT, "max_response_output_tokens": MAX_OUTPUT_TOKENS_DEFAULT,
        "max_output_tokens": MAX_OUTPUT_TOKENS_DEFAULT,
    }


# --- small typed checks ---------------------------------------------------------------------------------
def _where(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_error(where: str, wanted: str, value: Any) -> InvalidEvent:
    return InvalidEvent(where, f"must be {wanted}, got {_json_type(value)}", INVALID_TYPE)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _type_error(where, "a string", value)
    return value


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _type_error(where, "a boolean", value)
    return value


def _number(value: Any, where: str, bounds: tuple[float, float]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(where, "a number", value)
    if not bounds[0] <= value <= bounds[1]:
        raise InvalidEvent(where, f"must be from {bounds[0]:g} to {bounds[1]:g}, got {value:g}")
    return float(value)


def _integer(value: object, where: str, bounds: tuple[int, int | None]) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(where, "an integer", value)
    low, high = bounds
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidEvent(where, f"must be {span}, got {value}")
    return value


def _choice(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidEvent(where, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _type_error(where, "an object", value)
    return value


def _unknown(fields: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    for name in fields:
        if name not in known:
            raise InvalidEvent(_where(prefix, name), "unknown parameter", UNKNOWN_PARAMETER)


# --- configuration fields shared by session.update and response.create ------------------------------------
def max_output_tokens(value: Any, where: str) -> int | str:
    """An integer 1-4096 or the string "inf"."""
    if value == "inf":
        return "inf"
    if isinstance(value, str):
        raise InvalidEvent(where, f"must be an integer from 1 to 4096 or 'inf', got {value!r}")
    return _integer(value, where, MAX_OUTPUT_TOKENS_RANGE)


def modalities(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InvalidEvent(where, "must be a non-empty array of " + " and ".join(MODALITIES),
                           INVALID_TYPE if not isinstance(value, list) else INVALID_VALUE)
    for i, m in enumerate(value):
        _choice(m, f"{where}[{i}]", MODALITIES)
    if len(set(value)) != len(value):
        raise InvalidEvent(where, "must not repeat a modality")
    return list(value)


def tool(value: Any, where: str) -> dict[str, Any]:
    """A function tool: type function, name, description?, parameters (an object schema, required).

    The name and the schema are checked by `wire.tools`, the one reader of tools for every family."""
    spec = _object(value, where)
    _unknown(spec, frozenset({"type", "name", "description", "parameters"}), where)
    if spec.get("type") != "function":
        raise InvalidEvent(f"{where}.type", f"must be 'function', got {spec.get('type')!r}")
    _required(spec, "name", where)
    _object(_required(spec, "parameters", where), f"{where}.parameters")
    try:
        parsed = parse_tool(spec, where)
    except InvalidRequest as exc:
        raise InvalidEvent(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
    return {"type": "function", "name": parsed.name, "description": parsed.description or "",
            "parameters": copy.deepcopy(dict(parsed.parameters))}


def tools(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _type_error(where, "an array", value)
    out = [tool(t, f"{where}[{i}]") for i, t in enumerate(value)]
    names = [t["name"] for t in out]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InvalidEvent(f"{where}[{i}].name", f"duplicate tool name {name!r}")
    return out


def tool_choice(value: Any, where: str) -> str | dict[str, str]:
    """auto, none, required, or {"type": "function", "name": ...} for one named tool."""
    if isinstance(value, dict):
        _unknown(value, frozenset({"type", "name"}), where)
        if value.get("type") != "function":
            raise InvalidEvent(f"{where}.type", f"must be 'function', got {value.get('type')!r}")
        return {"type": "function", "name": _string(_required(value, "name", where), f"{where}.name")}
    return _choice(value, where, TOOL_CHOICES)


def turn_detection(value: Any, where: str) -> dict[str, Any] | None:
    """null (manual commits) or server_vad with the spec's ranges; unset fields take the defaults."""
    if value is None:
        return None
    spec = _object(value, where)
    _unknown(spec, _VAD_FIELDS, where)
    out = default_turn_detection()
    out["type"] = _choice(spec.get("type", "server_vad"), f"{where}.type", TURN_DETECTION_TYPES)
    if spec.get("threshold") is not None:
        out["threshold"] = _number(spec["threshold"], f"{where}.threshold", VAD_THRESHOLD_RANGE)
    if spec.get("prefix_padding_ms") is not None:
        out["prefix_padding_ms"] = _integer(spec["prefix_padding_ms"], f"{where}.prefix_padding_ms",
                                            VAD_PREFIX_PADDING_MS_RANGE)
    if spec.get("silence_duration_ms") is not None:
        out["silence_duration_ms"] = _integer(spec["silence_duration_ms"], f"{where}.silence_duration_ms",
                                              VAD_SILENCE_DURATION_MS_RANGE)
    for flag in ("create_response", "interrupt_response"):
        if spec.get(flag) is not None:
            out[flag] = _boolean(spec[flag], f"{where}.{flag}")
    return out


def input_audio_transcription(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    spec = _object(value, where)
    _unknown(spec, _TRANSCRIPTION_FIELDS, where)
    for name in ("model", "language", "prompt"):
        if spec.get(name) is not None:
            _string(spec[name], f"{where}.{name}")
    if spec.get("enabled") is not None and not _boolean(spec["enabled"], f"{where}.enabled"):
        return None
    return {"model": spec.get("model") or "whisper-1", "language": spec.get("language"),
            "prompt": spec.get("prompt")}


_FIELD_CHECKS: dict[str, Any] = {
    "modalities": modalities,
    "instructions": _string,
    "voice": lambda v, w: _choice(v, w, VOICES),
    "input_audio_format": lambda v, w: _choice(v, w, AUDIO_FORMATS),
    "output_audio_format": lambda v, w: _choice(v, w, AUDIO_FORMATS),
    "input_audio_transcription": input_audio_transcription,
    "turn_detection": turn_detection,
    "tools": tools,
    "tool_choice": tool_choice,
    "temperature": lambda v, w: _number(v, w, TEMPERATURE_RANGE),
    "max_output_tokens": max_output_tokens,
    "max_response_output_tokens": max_output_tokens,
}


def session_update(current: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """The session after a session.update event; `current` is left as it was.

    The configuration may sit nested (`{"type": "session.update", "session": {...}}`) as the SDKs send
    it, or beside `type` as the spec's table reads; both at once apply in that order, nested last."""
    top = {k: v for k, v in event.items() if k not in _ENVELOPE and k != "session"}
    out = update_session(current, top, "") if top else copy.deepcopy(dict(current))
    if "session" in event:
        out = update_session(out, _object(event["session"], "session"), "session")
    return out


def update_session(current: Mapping[str, Any], fields: Mapping[str, Any], prefix: str = "session"
                   ) -> dict[str, Any]:
    """The session after a partial update, every field checked; `current` is left as it was."""
    _unknown({k: v for k, v in fields.items() if k not in _IGNORED_SESSION_FIELDS}, _SESSION_FIELDS, prefix)
    out = copy.deepcopy(dict(current))
    for name, value in fields.items():
        if name in _IGNORED_SESSION_FIELDS:
            continue
        if value is None and name not in ("input_audio_transcription", "turn_detection"):
            if name == "max_response_output_tokens" or name == "max_output_tokens":
                value = MAX_OUTPUT_TOKENS_DEFAULT
            else:
                raise _type_error(_where(prefix, name), "set (null is not allowed here)", value)
        out[name] = _FIELD_CHECKS[name](value, _where(prefix, name))
    # one limit, two spellings: the spec's `max_output_tokens` and the SDKs' `max_response_output_tokens`
    for spelling in ("max_output_tokens", "max_response_output_tokens"):
        if spelling in fields:
            out["max_output_tokens"] = out["max_response_output_tokens"] = out[spelling]
    _check_named_choice(out, prefix)
    return out


def _check_named_choice(config: Mapping[str, Any], prefix: str) -> None:
    choice = config.get("tool_choice")
    names = {t["name"] for t in config.get("tools") or []}
    if isinstance(choice, dict) and choice["name"] not in names:
        raise InvalidEvent(_where(prefix, "tool_choice.name"), f"names no tool in tools: {choice['name']!r}")
    if choice == "required" and not names:
        raise InvalidEvent(_where(prefix, "tool_choice"), "'required' needs at least one tool in tools")


def response_options(session: Mapping[str, Any], value: Any, where: str = "response") -> dict[str, Any]:
    """The settings of one response: the session's, overridden by response.create's `response`."""
    spec = {} if value is None else _object(value, where)
    _unknown(spec, _RESPONSE_FIELDS, where)
    inherited = ("modalities", "instructions", "voice", "output_audio_format", "tools", "tool_choice",
                 "temperature", "max_output_tokens")
    out = {k: copy.deepcopy(session[k]) for k in inherited}
    out.update(conversation="auto", metadata=None, input=None)
    for name, check in _FIELD_CHECKS.items():
        if name in spec and name in _RESPONSE_FIELDS and spec[name] is not None:
            key = "max_output_tokens" if name == "max_response_output_tokens" else name
            out[key] = check(spec[name], f"{where}.{name}")
    if spec.get("conversation") is not None:
        out["conversation"] = _choice(spec["conversation"], f"{where}.conversation", RESPONSE_CONVERSATIONS)
    if spec.get("metadata") is not None:
        metadata = _object(spec["metadata"], f"{where}.metadata")
        if len(metadata) > REALTIME_MAX_METADATA_KEYS:
            raise InvalidEvent(f"{where}.metadata", f"may hold at most {REALTIME_MAX_METADATA_KEYS} keys")
        for key, text in metadata.items():
            _string(text, f"{where}.metadata.{key}")
        out["metadata"] = dict(metadata)
    if spec.get("input") is not None:
        if not isinstance(spec["input"], list):
            raise _type_error(f"{where}.input", "an array", spec["input"])
        out["input"] = [item(i, f"{where}.input[{n}]", references=True) for n, i in enumerate(spec["input"])]
    _check_named_choice(out, where)
    return out


# --- conversation items -----------------------------------------------------------------------------------
def _required(spec: Mapping[str, Any], name: str, where: str) -> Any:
    if spec.get(name) is None:
        raise InvalidEvent(_where(where, name), "is required", MISSING_PARAMETER)
    return spec[name]


def audio_bytes(value: Any, where: str) -> bytes:
    """Base64 audio decoded; anything else is refused naming `where`."""
    text = _string(value, where)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidEvent(where, "must be base64-encoded audio") from None


def item(value: Any, where: str = "item", *, references: bool = False) -> dict[str, Any]:
    """A conversation item a client may create (protocols.md §6.5), normalised; audio stays base64.

    `references`: response.create's `input` may also hold `{"type": "item_reference", "id": ...}`."""
    spec = _object(value, where)
    kind = spec.get("type", "message")
    if references and kind == "item_reference":
        return {"type": "item_reference", "id": _string(_required(spec, "id", where), f"{where}.id")}
    _choice(kind, f"{where}.type", ITEM_TYPES)
    out: dict[str, Any] = {"type": kind}
    if spec.get("id") is not None:
        item_id = _string(spec["id"], f"{where}.id")
        if not 0 < len(item_id) <= REALTIME_MAX_ITEM_ID_LENGTH:
            raise InvalidEvent(f"{where}.id", f"must be 1 to {REALTIME_MAX_ITEM_ID_LENGTH} characters")
        out["id"] = item_id
    if spec.get("object") not in (None, "realtime.item"):
        raise InvalidEvent(f"{where}.object", "must be 'realtime.item'")
    if spec.get("status") is not None:
        out["status"] = _choice(spec["status"], f"{where}.status", ITEM_STATUSES)
    if kind == "message":
        role = _choice(_required(spec, "role", where), f"{where}.role", ROLES)
        content = _required(spec, "content", where)
        if not isinstance(content, list):
            raise _type_error(f"{where}.content", "an array", content)
        parts = [_part(p, role, f"{where}.content[{i}]") for i, p in enumerate(content)]
        out.update(role=role, content=parts)
    elif kind == "function_call":
        out.update(call_id=_string(_required(spec, "call_id", where), f"{where}.call_id"),
                   name=_string(_required(spec, "name", where), f"{where}.name"),
                   arguments=_string(spec.get("arguments", ""), f"{where}.arguments"))
    else:
        out.update(call_id=_string(_required(spec, "call_id", where), f"{where}.call_id"),
                   output=_string(_required(spec, "output", where), f"{where}.output"))
    return out


def _part(value: Any, role: str, where: str) -> dict[str, Any]:
    spec = _object(value, where)
    allowed = CONTENT_TYPES[role]
    kind = _choice(spec.get("type"), f"{where}.type", tuple(allowed))
    text_field = allowed[kind]
    if text_field is not None:
        text = _string(_required(spec, text_field, where), f"{where}.{text_field}")
        return {"type": kind, text_field: text}
    part: dict[str, Any] = {"type": kind}
    if spec.get("audio") is not None:
        audio_bytes(spec["audio"], f"{where}.audio")
        part["audio"] = spec["audio"]
    if spec.get("transcript") is not None:
        part["transcript"] = _string(spec["transcript"], f"{where}.transcript")
    if "audio" not in part and "transcript" not in part:
        raise InvalidEvent(f"{where}.audio", "an audio part needs 'audio' or 'transcript'", MISSING_PARAMETER)
    part.setdefault("transcript", None)
    return part


# --- client events ----------------------------------------------------------------------------------------
def parse_client_event(data: str | bytes) -> dict[str, Any]:
    """A client event from one text frame, its envelope and required fields checked.

    Raises InvalidEvent carrying the event's own `event_id` when it has one, so the error event can
    name the offending event."""
    if isinstance(data, bytes):
        raise InvalidEvent("", "events are JSON in text frames, not binary frames", INVALID_EVENT)
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise InvalidEvent("", f"the event is not valid JSON: {exc}", INVALID_JSON) from None
    if not isinstance(event, dict):
        raise InvalidEvent("", f"an event must be a JSON object, got {_json_type(event)}", INVALID_EVENT)
    event_id = event.get("event_id")
    try:
        check_client_event(event)
    except InvalidEvent as exc:
        exc.event_id = event_id if isinstance(event_id, str) else None
        raise
    return event


def check_client_event(event: Mapping[str, Any]) -> None:
    """The envelope and the fields every event of its type must carry, with their JSON types."""
    if event.get("event_id") is not None:
        _string(event["event_id"], "event_id")
    kind = event.get("type")
    if kind is None:
        raise InvalidEvent("type", "is required", MISSING_PARAMETER)
    if not isinstance(kind, str) or kind not in CLIENT_EVENTS:
        raise InvalidEvent("type", f"unknown event type {kind!r}; expected one of "
                           + ", ".join(CLIENT_EVENTS), UNKNOWN_EVENT)
    for name in CLIENT_EVENTS[kind]:
        _required(event, name, "")
    if kind == INPUT_AUDIO_BUFFER_APPEND:
        _string(event["audio"], "audio")
    elif kind in (CONVERSATION_ITEM_RETRIEVE, CONVERSATION_ITEM_DELETE, CONVERSATION_ITEM_TRUNCATE):
        _string(event["item_id"], "item_id")
        if kind == CONVERSATION_ITEM_TRUNCATE:
            _integer(event["content_index"], "content_index", (0, None))
            _integer(event["audio_end_ms"], "audio_end_ms", (0, None))
    elif kind == CONVERSATION_ITEM_CREATE and event.get("previous_item_id") is not None:
        _string(event["previous_item_id"], "previous_item_id")
    elif kind == RESPONSE_CANCEL and event.get("response_id") is not None:
        _string(event["response_id"], "response_id")
    elif kind == RESPONSE_CREATE and event.get("response") is not None:
        _object(event["response"], "response")
    elif kind == SESSION_UPDATE and "session" in event:
        _object(event["session"], "session")
