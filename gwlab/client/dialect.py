"""What differs between gateways, written once: the decisions route and shape, the chat token-cap field.

The spec says decisions are `POST /decisions` in TypeSafe's System One shape and a chat request caps
its output with `max_completion_tokens`. Servers gwlab did not write differ: System One servers
(laya-serve, skejja, ...) serve `/systemone`; LiteLLM's proxy serves `/decisions` in OpenAI's own
decisions shape (`input` + a `questions` list); llama.cpp, LiteLLM and most OpenAI-compatible servers
read only the older `max_tokens`. A `Dialect` names those choices:

- `decisions_path`: "/decisions" (spec) | "/systemone"
- `decisions_shape`: "systemone" (spec: `state` + a `questions` map) | "openai"
- `token_cap`: "both" (send `max_completion_tokens` and `max_tokens` with the same value: every
  server we know reads one of them and none refuses the pair) | "max_completion_tokens" | "max_tokens"
- `batches`: "both" (OpenAI files + batches and Anthropic message batches) | "openai" | "anthropic" |
  "none": a batch API the gateway lacks is refused by `gwlab.client.batches` before anything is sent
- `structured_output`: "native" (the family's form: `response_format`, `text.format`, a forced tool) |
  "prompt" (the schema in the prompt, parsed): how `schema=` calls and `df.gw.extract` ask for JSON

Each setting carries its provenance: "explicit" (the user's `dialect=`), "default", or
"detected: <the evidence>". Explicit settings win and are never re-detected. A detected setting is
remembered per normalized base URL for the life of the process (so every gateway object of that
URL shares it), logged once at INFO, and shown by `repr(gw)` and `gw.dialect`: never silent.

The functions here are pure (no I/O): the transport asks `adapt_request` what to send, `adapt_response`
how to read the answer, and `fallback` whether an error is evidence for another setting worth one
resend. Detection rules (docs/guide/byo-gateway.md, "What gwlab detects and how to override it"):

- `GET /models` answered in TypeSafe's shape only (`{"models": [...]}`, no OpenAI `data` list):
  decisions go to `/systemone`.
- `POST /decisions` answered 404 for a missing *route* (not a missing model): `/systemone` is tried
  once (a 404 route never ran, so nothing was billed) and remembered if it works.
- `POST /decisions` answered 400/422 and the error names OpenAI's `input` field, or the gateway
  identifies as LiteLLM (its documented `x-litellm-version` header, whose `/decisions` is OpenAI's
  shape): the request is translated to OpenAI's shape (`wire.decisions_openai`) and sent once more.
- A chat 400 whose error names one cap field (`param` or message): resent once without it; the
  other field is remembered.
- A 400/422 naming the family's structured-output field (`StructuredForm.refused`): the same question is
  asked once more with the schema in the prompt (`wire/structured/driver.py`), and "prompt" remembered
  (`refused_form`, with a StructuredFallbackWarning once per gateway), for single calls and frame runs alike.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gwlab import errors
from gwlab.errors import StructuredFallbackWarning
from gwlab.wire import chat as wire_chat
from gwlab.wire import decisions as wire_decisions
from gwlab.wire import decisions_openai
from gwlab.wire.families import FAMILIES
from gwlab.wire.structured.forms import IN_PROMPT, StructuredForm

__all__ = ["DEFAULTS", "Dialect", "DialectBook", "Fallback", "Outgoing", "adapt_request", "adapt_response",
           "fallback", "forget", "from_models", "route_missing"]

log = logging.getLogger("gwlab")

DECISIONS_PATH = FAMILIES["decisions"].path  # the spec's route, what every caller asks for
SYSTEM_ONE_PATH = FAMILIES["systemone"].path
CHAT_PATH = FAMILIES["chat"].path
CHOICES: dict[str, tuple[str, ...]] = {
    "decisions_path": (DECISIONS_PATH, SYSTEM_ONE_PATH),
    "decisions_shape": ("systemone", "openai"),
    "token_cap": ("both", *wire_chat.TOKEN_CAP_FIELDS),
    "batches": ("both", "openai", "anthropic", "none"),  # which provider batch APIs the gateway serves
    "structured_output": ("native", "prompt"),  # how JSON of a schema is asked for (wire/structured/forms.py)
}
DEFAULTS: dict[str, str] = {"decisions_path": DECISIONS_PATH, "decisions_shape": "systemone", "token_cap": "both",
                            "batches": "both", "structured_output": "native"}
EXPLICIT, DEFAULT = "explicit", "default"


@dataclass(frozen=True)
class Dialect:
    """How one gateway differs from the spec. A field left None is gwlab's to choose (default or
    detected); a field set is explicit and wins. `provenance` says where each value came from."""

    decisions_path: str | None = None
    decisions_shape: str | None = None
    token_cap: str | None = None
    batches: str | None = None
    structured_output: str | None = None
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise errors.InvalidRequest(f"dialect.{name}", f"one of {', '.join(map(repr, allowed))}; "
                                                               f"got {value!r}")

    @classmethod
    def coerce(cls, value: Dialect | Mapping[str, Any] | None) -> Dialect:
        """A `Dialect` from the user's `dialect=` (a Dialect, a mapping, or None); unknown keys refused."""
        if value is None:
            return cls()
        if isinstance(value, Dialect):
            return replace(value, provenance={})
        if not isinstance(value, Mapping):
            raise errors.InvalidRequest("dialect", f"a mapping or a gwlab Dialect; got {type(value).__name__}")
        for key in value:
            if key not in CHOICES:
                raise errors.InvalidRequest(f"dialect.{key}", f"unknown setting; the settings are "
                                                              f"{', '.join(CHOICES)}")
        return cls(**value)

    def explicit(self) -> dict[str, str]:
        """The settings this dialect fixes (the fields it sets)."""
        return {name: getattr(self, name) for name in CHOICES if getattr(self, name) is not None}

    def source(self, name: str) -> str:
        """Where the value of `name` came from: explicit, default, or detected: <evidence>."""
        return self.provenance.get(name, EXPLICIT if getattr(self, name) is not None else DEFAULT)

    def get(self, name: str) -> str:
        value = getattr(self, name)
        return DEFAULTS[name] if value is None else value

    def changes(self) -> dict[str, tuple[str, str]]:
        """The settings that differ from the spec's defaults, with their provenance."""
        return {name: (self.get(name), self.source(name)) for name in CHOICES if self.get(name) != DEFAULTS[name]}

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={self.get(name)!r} ({self.source(name)})" for name in CHOICES)
        return f"Dialect({shown})"


# --- what gwlab learned, per gateway, for the life of the process ------------------------------------

_DETECTED: dict[str, dict[str, tuple[str, str]]] = {}  # base_url -> name -> (value, evidence)
_LOCK = threading.Lock()


def forget(base_url: str | None = None) -> None:
    """Drop what was detected about one gateway (or all): the next calls detect again."""
    with _LOCK:
        if base_url is None:
            _DETECTED.clear()
        else:
            _DETECTED.pop(base_url, None)


class DialectBook:
    """One gateway object's view: its explicit settings over what was detected for its base URL."""

    def __init__(self, base_url: str, explicit: Dialect | Mapping[str, Any] | None = None) -> None:
        self.base_url = base_url
        self.fixed = Dialect.coerce(explicit).explicit()

    @property
    def dialect(self) -> Dialect:
        """Every setting resolved, each with its provenance."""
        with _LOCK:
            detected = dict(_DETECTED.get(self.base_url, {}))
        values: dict[str, str] = {}
        provenance: dict[str, str] = {}
        for name in CHOICES:
            if name in self.fixed:
                values[name], provenance[name] = self.fixed[name], EXPLICIT
            elif name in detected:
                values[name], provenance[name] = detected[name][0], f"detected: {detected[name][1]}"
            else:
                values[name], provenance[name] = DEFAULTS[name], DEFAULT
        return Dialect(**values, provenance=provenance)

    def may_learn(self, name: str) -> bool:
        return name not in self.fixed

    def learn(self, name: str, value: str, evidence: str) -> bool:
        """Remember a detected setting for this base URL (never over an explicit one); log it once.
        True when it is new."""
        if name in self.fixed:
            return False
        with _LOCK:
            known = _DETECTED.setdefault(self.base_url, {})
            if known.get(name, (None,))[0] == value:
                return False
            known[name] = (value, evidence)
        log.info("gwlab: %s: detected %s=%r (%s); pass dialect={%r: ...} to set it yourself",
                 self.base_url, name, value, evidence, name)
        return True


    # -- structured output: the native form, or the schema in the prompt ---------------------------------

    def structured_form(self, native: StructuredForm) -> StructuredForm:
        """The form to ask in at this gateway: its family's native one unless it is known to refuse it."""
        return IN_PROMPT if self.dialect.get("structured_output") == "prompt" else native

    def refused_form(self, native: StructuredForm, error: BaseException) -> bool:
        """The gateway refused `native` (the error names its field): remember "prompt" and say so once.
        False when the user fixed the setting (`dialect={"structured_output": "native"}`): the refusal stands."""
        if not self.may_learn("structured_output"):
            return False
        if self.learn("structured_output", "prompt", f"{native.name} refused: {error}"):
            warnings.warn(f"{self.base_url} has no structured output ({native.name} refused with a 400): gwlab asks "
                          "in the prompt and parses, for this gateway from now on (dialect={'structured_output': "
                          "'native'} on the gateway, or structured='native' on df.gw.extract, to force the native "
                          "form)", StructuredFallbackWarning, stacklevel=2)
        return True


# --- adapting one request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    """What is actually sent for a caller's (family, path, body) under a dialect."""

    path: str
    body: Any
    dialect: Dialect
    original: Any = None  # the caller's body, kept to translate the answer back
    translated: bool = False  # the body was translated to OpenAI's decisions shape


def adapt_request(dialect: Dialect, family: str, method: str, path: str, body: Any) -> Outgoing:
    """The route and body to send: decisions re-routed/translated, the chat cap written as the dialect says."""
    if method == "POST" and family == "decisions" and path == DECISIONS_PATH and isinstance(body, Mapping):
        return _decisions(dialect, body)
    if method == "POST" and family == "chat" and path == CHAT_PATH and isinstance(body, Mapping):
        return Outgoing(path, _token_cap(dialect.get("token_cap"), body), dialect, body)
    return Outgoing(path, body, dialect, body)


def _decisions(dialect: Dialect, body: Mapping[str, Any]) -> Outgoing:
    route = dialect.get("decisions_path")
    if route == SYSTEM_ONE_PATH and isinstance(body.get("questions"), Mapping):
        wire_decisions.check_instructions(body["questions"])  # System One servers require them
    if route == DECISIONS_PATH and dialect.get("decisions_shape") == "openai" and not _is_openai(body):
        return Outgoing(route, decisions_openai.to_openai_request(body), dialect, body, translated=True)
    return Outgoing(route, body, dialect, body)


def _is_openai(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("questions"), list)


def _token_cap(cap: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
    given = [body[name] for name in wire_chat.TOKEN_CAP_FIELDS if body.get(name) is not None]
    if not given:
        return body
    out = dict(body)
    for name in wire_chat.TOKEN_CAP_FIELDS:
        if cap in ("both", name):
            out[name] = given[0]
        else:
            out.pop(name, None)
    return out


def adapt_response(out: Outgoing, body: Any) -> Any:
    """The answer as the caller's family reads it (OpenAI-shape decisions back to System One)."""
    if out.translated:
        return decisions_openai.from_openai_response(body, out.original)
    return body


# --- errors as evidence ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fallback:
    """One setting worth one resend, and the evidence for it."""

    name: str
    value: str
    evidence: str


# a framework's default words for an unrouted path: Starlette/FastAPI "Not Found", Go's "404 page not found"
_NOT_FOUND = re.compile(r"^\s*(404[:\s]*)?(page )?(not found|no route|no such route|route not found|unknown route)"
                        r"\.?\s*$", re.IGNORECASE)
_INPUT = re.compile(r"(?m)(^\s*input\s*$|['\"`]input['\"`]|\binput\b[^_\n]{0,20}\b(required|missing)\b)")


def route_missing(body: Any) -> bool:
    """Whether a 404 body says the route does not exist (rather than a model or resource).

    A server that never routed the request answers with its framework's default: FastAPI's
    `{"detail": "Not Found"}` (or the same words inside an error object, as laya-serve writes it), an
    HTML or plain-text page, or nothing. A spec error object that says more (a code, a param, a
    message naming a model or a resource) came from a route that ran.
    """
    if body is None or (isinstance(body, str) and (not body.strip() or "<" in body or _NOT_FOUND.match(body))):
        return True
    if not isinstance(body, Mapping):
        return False
    error = body.get("error", body.get("detail"))
    if isinstance(error, str):
        return bool(_NOT_FOUND.match(error))
    if isinstance(error, Mapping):
        if error.get("param") or error.get("code") not in (None, "", "not_found", 404, "404"):
            return False
        message = error.get("message")
        return isinstance(message, str) and bool(_NOT_FOUND.match(message))
    return False


def fallback(out: Outgoing, family: str, error: errors.StatusError, tried: set[str]) -> Fallback | None:
    """The setting an error is evidence for (not yet tried in this call), or None: raise the error."""
    if family == "decisions":
        return _decisions_fallback(out, error, tried)
    if family == "chat" and "token_cap" not in tried and out.dialect.get("token_cap") == "both" and all(
            isinstance(out.body, Mapping) and out.body.get(name) is not None
            for name in wire_chat.TOKEN_CAP_FIELDS):
        return _cap_fallback(error)
    return None


def from_models(body: Any) -> Fallback | None:
    """`GET /models` in TypeSafe's shape only: a System One server, whose decisions route is /systemone."""
    if isinstance(body, Mapping) and isinstance(body.get("models"), list) and not isinstance(body.get("data"), list):
        return Fallback("decisions_path", SYSTEM_ONE_PATH,
                        'GET /v1/models answered in TypeSafe\'s shape ({"models": [...]}, no OpenAI data list)')
    return None


def _decisions_fallback(out: Outgoing, error: errors.StatusError, tried: set[str]) -> Fallback | None:
    dialect = out.dialect
    path = f"POST /v1{out.path}"
    if (error.status == 404 and out.path == DECISIONS_PATH and "decisions_path" not in tried
            and route_missing(error.body)):
        return Fallback("decisions_path", SYSTEM_ONE_PATH,
                        f"{path} answered 404 (no such route); /v1{SYSTEM_ONE_PATH} answered")
    if (error.status in (400, 422) and out.path == DECISIONS_PATH and not out.translated
            and dialect.get("decisions_shape") == "systemone" and "decisions_shape" not in tried):
        if _names_input(error):
            return Fallback("decisions_shape", "openai",
                            f"{path} refused the System One body naming OpenAI's `input` field; "
                            f"OpenAI's shape answered")
        if any(name.lower().startswith("x-litellm-") for name in error.headers):
            return Fallback("decisions_shape", "openai",
                            f"{path} answered {error.status} from LiteLLM (x-litellm-* headers), whose "
                            f"/decisions takes OpenAI's shape; OpenAI's shape answered")
    return None


def _names_input(error: errors.StatusError) -> bool:
    if error.field in ("input", "body.input"):
        return True
    message = error.error.get("message") if isinstance(error.error, Mapping) else None
    return isinstance(message, str) and bool(_INPUT.search(message))


def _cap_fallback(error: errors.StatusError) -> Fallback | None:
    if error.status not in (400, 422):
        return None
    named = [name for name in wire_chat.TOKEN_CAP_FIELDS if _names(error, name)]
    if len(named) != 1:
        return None
    other = next(name for name in wire_chat.TOKEN_CAP_FIELDS if name != named[0])
    return Fallback("token_cap", other, f"POST /v1{CHAT_PATH} answered {error.status} naming `{named[0]}`; "
                                        f"resent without it, answered")


def _names(error: errors.StatusError, name: str) -> bool:
    if error.field is not None and error.field.split(".")[-1] == name:
        return True
    message = error.error.get("message") if isinstance(error.error, Mapping) else None
    return isinstance(message, str) and re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None

