"""The protocol families, one row each: every layer reads its facts here instead of repeating a string.

A row says where a family is served, which request field caps its answer, whether a lost POST may be
resent, how its usage is read, how its answer ends, which vendor's error shape and request-id header it
speaks, how it asks for structured output, and which model it uses when a call names none. The client,
the frames layer, the views and the local gateway all read the same row, so adding a family is: its
`wire/` module, a row here, its client class and its route (`tests/wire/test_protocols_wire.py` fails
when a family is missing anywhere else).

Task APIs (videos, images, any described one) are not rows: each is a `TaskFamily` description
(`wire/jobs/tasks.py`), because their paths and fields differ between gateways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gwlab.wire import endings
from gwlab.wire.limits import API_PREFIX
from gwlab.wire.models import DEFAULT_MODELS
from gwlab.wire.structured.forms import RESPONSE_FORMAT, TEXT_FORMAT, TOOL_INPUT, StructuredForm

__all__ = ["FAMILIES", "TEXT", "ProtocolFamily", "by_path", "family", "read_usage", "usage_of"]

Vendor = Literal["openai", "anthropic", "typesafe"]
# usage field names, first match wins: the spec's names, then chat completions' older ones
INPUT_TOKEN_FIELDS = ("input_tokens", "prompt_tokens")
OUTPUT_TOKEN_FIELDS = ("output_tokens", "completion_tokens")


@dataclass(frozen=True, slots=True)
class ProtocolFamily:
    """One protocol family of the gateway, as data."""

    name: str  # the ledger's `family` and the `protocol=` users pass: "chat"
    path: str  # relative to the base URL: "/chat/completions"
    method: str = "POST"
    token_cap: str | None = None  # the request field that caps the answer
    idempotent: bool = False  # a lost POST may be resent: its only side effect is billing (spec, Errors)
    charges_output: bool = True  # False where only input tokens are billed (decisions)
    vendor: Vendor = "openai"  # whose error body shape and request-id header the family speaks
    structured_output: StructuredForm | None = None  # how it asks for JSON of a schema (wire/structured/forms.py)
    ability: str | None = None  # its key in DEFAULT_MODELS: the model a call without `model=` uses
    client: str | None = None  # the gateway attribute that speaks it: `gw.chat`
    frame_method: str | None = None  # the df.gw method that runs it over rows
    ending: Callable[[Any], str | None] | None = None  # an answer body -> gwlab's ending word
    dialect_of: str | None = None  # another route for this family on some gateways (see client/dialect.py)

    @property
    def default_model(self) -> str | None:
        """The model a call of this family uses when it names none (`wire/models.DEFAULT_MODELS`)."""
        return DEFAULT_MODELS.get(self.ability) if self.ability else None

    @property
    def route(self) -> str:
        """The path as the local gateway mounts it (under the API prefix)."""
        return API_PREFIX + self.path


def _ending(name: str) -> Callable[[Any], str | None]:
    return lambda body: endings.body_ending(name, body)


_ROWS = (
    ProtocolFamily("models", "/models", method="GET", idempotent=True, client="models"),
    ProtocolFamily("chat", "/chat/completions", token_cap="max_completion_tokens", idempotent=True,
                   structured_output=RESPONSE_FORMAT, ability="text", client="chat", frame_method="chat",
                   ending=_ending("chat")),
    ProtocolFamily("responses", "/responses", token_cap="max_output_tokens", idempotent=True,
                   structured_output=TEXT_FORMAT, ability="text", client="responses", frame_method="respond",
                   ending=_ending("responses")),
    ProtocolFamily("messages", "/messages", token_cap="max_tokens", idempotent=True, vendor="anthropic",
                   structured_output=TOOL_INPUT, ability="text", client="messages", frame_method="messages",
                   ending=_ending("messages")),
    ProtocolFamily("decisions", "/decisions", idempotent=True, charges_output=False, ability="decisions",
                   client="decisions", frame_method="decide"),
    # TypeSafe's System One route: the decisions family as some gateways serve it (client/dialect.py)
    ProtocolFamily("systemone", "/systemone", idempotent=True, charges_output=False, vendor="typesafe",
                   ability="decisions", client="decisions", dialect_of="decisions"),
    # OpenAI's embeddings: vectors for texts (input tokens only are billed); not a df.gw method
    ProtocolFamily("embeddings", "/embeddings", idempotent=True, charges_output=False, ability="embeddings",
                   client="embeddings"),
    ProtocolFamily("realtime", "/realtime", method="GET", token_cap="max_response_output_tokens",
                   ability="realtime", client="realtime"),
)
FAMILIES: Mapping[str, ProtocolFamily] = {row.name: row for row in _ROWS}
TEXT = tuple(row.name for row in _ROWS if row.frame_method and row.ability == "text")


def family(name: str) -> ProtocolFamily:
    """The row named `name`; a clear error naming the known families otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"no protocol family {name!r}; known: {', '.join(FAMILIES)}") from None


def by_path(path: str) -> ProtocolFamily | None:
    """The row a request path belongs to (with or without the API prefix, sub-paths included)."""
    if path.startswith(API_PREFIX + "/"):
        path = path[len(API_PREFIX):]
    for row in sorted(_ROWS, key=lambda r: -len(r.path)):
        if path == row.path or path.startswith(row.path + "/"):
            return row
    return None


def read_usage(usage: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of a usage mapping or typed usage of any family; None where not given."""
    if usage is None:
        return None, None
    if isinstance(usage, Mapping):
        values = [next((usage[f] for f in fields if f in usage), None)
                  for fields in (INPUT_TOKEN_FIELDS, OUTPUT_TOKEN_FIELDS)]
    else:
        values = [next((getattr(usage, f) for f in fields if getattr(usage, f, None) is not None), None)
                  for fields in (INPUT_TOKEN_FIELDS, OUTPUT_TOKEN_FIELDS)]
    given, taken = (v if isinstance(v, int) and not isinstance(v, bool) else None for v in values)
    return given, taken


def usage_of(body: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of an answer body's `usage`."""
    return read_usage(body.get("usage") if isinstance(body, Mapping) else None)
