"""The structured-output forms: how a family asks for JSON of a schema, as objects on its family row.

A form says which request fields ask for the JSON (`request_fields`), what the prompt adds (`instructions`:
the absent-field rule natively, the whole schema in the prompt), where the reply puts the answer
(`answer_text`), how a gateway without the form refuses it (`refused`), and the turns that ask again
after an invalid answer (`reask_turns`). `IN_PROMPT` is the form of a gateway that has none: the schema
goes in the prompt and nothing is asked of the request. A new form is a subclass here and its name on a
row of `wire/families.py`; the driver (`driver.py`), single calls and frame runs read only these methods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gwlab.errors import AnswerInvalid
from gwlab.wire.schema import Schema

__all__ = ["IN_PROMPT", "RESPONSE_FORMAT", "TEXT_FORMAT", "TOOL_INPUT", "StructuredForm"]


class StructuredForm:
    """The schema in the prompt, nothing in the request: the base every native form refines."""

    name = "prompt"
    native = False  # True for a form the gateway must support (a request field it may refuse)
    param_names: tuple[str, ...] = ()  # the request fields a refusal's `param` names
    message_names: tuple[str, ...] = ()  # the names a refusal's message is matched for (unambiguous ones)

    def request_fields(self, schema: Schema) -> dict[str, Any]:
        """The request fields asking for JSON of `schema` in this form."""
        return {}

    def instructions(self, schema: Schema) -> str | None:
        """What the prompt adds after the user's last text: the absent-field rule natively (a grammar alone
        lets a small model guess), the schema itself in the prompt."""
        return schema.instructions() if not self.native else schema.absent_rule()

    def answer_text(self, schema: Schema, text: str | None, calls: Sequence[Mapping[str, Any]]) -> str | None:
        """Where the answer is in a reply (`calls` as `{name, arguments}`): the text, unless the form says."""
        return text

    def reask_turns(self, error: AnswerInvalid) -> list[dict[str, Any]]:
        """The turns that ask again after an invalid answer: the answer, then its validation error."""
        return [{"role": "assistant", "content": error.raw or "(no answer)"},
                {"role": "user", "content": f"That answer is invalid: {error}. Answer again with only the "
                                            "corrected JSON object."}]

    def refused(self, error: BaseException) -> bool:
        """Whether `error` is a 400/422 naming this form's request field (its `param`, or its message for
        the unambiguous names): the evidence that a gateway has no structured output in this form. A 500
        counts when it is a request validation error (llama-cpp-python's server answers `response_format`
        json_schema so: a request that never ran)."""
        status = getattr(error, "status", None)
        if not self.native or not (status in (400, 422) or (status == 500 and "validation error" in str(error))):
            return False
        param = str(getattr(error, "param", None) or "")
        return any(param == n or param.startswith(n + ".") for n in self.param_names) or any(
            n in str(error) for n in self.message_names)

    def __repr__(self) -> str:
        return f"<structured output: {self.name}>"


class _ResponseFormat(StructuredForm):
    """Chat completions: `response_format` json_schema, strict; the answer is the message text."""

    name, native, param_names, message_names = "response_format", True, ("response_format",), ("response_format",)

    def request_fields(self, schema: Schema) -> dict[str, Any]:
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": schema.name, "schema": schema.sent(), "strict": True}}}


class _TextFormat(StructuredForm):
    """Responses: `text.format` json_schema, strict; the answer is the output text."""

    name, native, param_names, message_names = "text.format", True, ("text.format", "text"), ("text.format",)

    def request_fields(self, schema: Schema) -> dict[str, Any]:
        return {"text": {"format": {"type": "json_schema", "name": schema.name, "schema": schema.sent(),
                                    "strict": True}}}


class _ToolInput(StructuredForm):
    """Messages: one forced tool whose input schema is the schema; the answer is that tool's input."""

    name, native, param_names, message_names = "tools", True, ("tools", "tool_choice"), ("tools", "tool_choice")

    def request_fields(self, schema: Schema) -> dict[str, Any]:
        return {"tools": [{"name": schema.name, "description": "Record the answer's fields.",
                           "input_schema": schema.sent()}],
                "tool_choice": {"type": "tool", "name": schema.name}}

    def answer_text(self, schema: Schema, text: str | None, calls: Sequence[Mapping[str, Any]]) -> str | None:
        for call in calls:
            if call.get("name") == schema.name:
                arguments = call.get("arguments")
                return arguments if isinstance(arguments, str) else json.dumps(arguments)
        return text


IN_PROMPT = StructuredForm()
RESPONSE_FORMAT = _ResponseFormat()
TEXT_FORMAT = _TextFormat()
TOOL_INPUT = _ToolInput()
