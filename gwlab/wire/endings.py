"""How an answer ended: one vocabulary for chat, responses and messages, streamed or not.

Each protocol says why an answer stopped in its own words (chat `finish_reason`, responses `status`
with `incomplete_details.reason`, messages `stop_reason`), and a stream can also stop before the
server said anything. The ledger, the `df.gw` result columns, the magics and the stream console all
report the same word for the same fact, so the mapping is written once, here:

- `complete`: the model ended its answer. chat `stop`, `tool_calls`, `function_call`; responses
  `completed`; messages `end_turn`, `stop_sequence`, `tool_use`.
- `capped`: stopped by the caller's token cap. chat `length`; responses `incomplete` with reason
  `max_output_tokens`; messages `max_tokens`.
- `filtered`: cut by a content filter. chat `content_filter`; responses `incomplete` with reason
  `content_filter`.
- `refused`: the model declined. a chat message's `refusal`; a responses `refusal` content part;
  messages `refusal`.
- `other`: the server named a reason gwlab does not know (messages `pause_turn`, a new chat value);
  the raw reason stays in the result.
- `interrupted`: cut before the protocol's end: the connection or body ended early, or the end
  marker came without the reason the protocol requires (`[DONE]` before every choice had a
  finish_reason, `message_stop` without a stop_reason, a response with no terminal status).
- `stopped`: the caller closed the stream before its end (Stop, Ctrl-C, `aclose`), or cancelled a
  response.
- `failed`: an error: an HTTP error status, an error event in the stream, responses `failed`.

`complete` (the boolean kept in the ledger and on streams) is true only for the ending `complete`.
A capped answer is not complete: it was cut where the cap fell, often mid-sentence, and the
responses protocol itself calls it `incomplete`; reporting it complete is what made `%%gw chat
--max-tokens 30` claim a cut reply was whole. Code that only asked "did the answer reach its end?"
reads `ending in ("complete", "capped", "filtered", "refused", "other")` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CAPPED", "COMPLETE", "ENDINGS", "FAILED", "FILTERED", "INTERRUPTED", "OTHER", "REFUSED", "STOPPED",
           "body_ending", "chat_ending", "is_complete", "messages_ending", "responses_ending"]

COMPLETE, CAPPED, FILTERED, REFUSED, OTHER = "complete", "capped", "filtered", "refused", "other"
INTERRUPTED, STOPPED, FAILED = "interrupted", "stopped", "failed"
ENDINGS = (COMPLETE, CAPPED, FILTERED, REFUSED, OTHER, INTERRUPTED, STOPPED, FAILED)

# the protocols' own words, per family
CHAT_FINISH = {"stop": COMPLETE, "tool_calls": COMPLETE, "function_call": COMPLETE, "length": CAPPED,
               "content_filter": FILTERED}
RESPONSES_INCOMPLETE = {"max_output_tokens": CAPPED, "content_filter": FILTERED}
MESSAGES_STOP = {"end_turn": COMPLETE, "stop_sequence": COMPLETE, "tool_use": COMPLETE, "max_tokens": CAPPED,
                 "refusal": REFUSED}


def is_complete(ending: str | None) -> bool | None:
    """The `complete` boolean of an ending (None when the ending is unknown)."""
    return None if ending is None else ending == COMPLETE


def chat_ending(finish_reasons: Iterable[str | None], refused: bool = False) -> str:
    """A chat answer: every choice must carry a finish_reason, else it did not reach its end.

    With several choices the least complete one decides (a capped choice makes the answer capped)."""
    reasons = list(finish_reasons)
    if not reasons or any(not reason for reason in reasons):
        return INTERRUPTED
    endings = [CHAT_FINISH.get(reason, OTHER) for reason in reasons]  # type: ignore[arg-type]  # none empty: above
    if refused and all(ending == COMPLETE for ending in endings):
        return REFUSED
    return _least(endings)


def responses_ending(status: str | None, incomplete_details: Mapping[str, Any] | None = None,
                     refused: bool = False) -> str:
    """A response: `completed`, `incomplete` with its reason, `failed`; anything else has not ended."""
    if status == "completed":
        return REFUSED if refused else COMPLETE
    if status == "incomplete":
        reason = incomplete_details.get("reason") if isinstance(incomplete_details, Mapping) else None
        return RESPONSES_INCOMPLETE.get(reason, OTHER) if isinstance(reason, str) else OTHER
    if status in ("failed", "error"):
        return FAILED
    if status == "cancelled":
        return STOPPED
    return INTERRUPTED  # in_progress, queued, or no status at all


def messages_ending(stop_reason: str | None) -> str:
    """A message: its stop_reason; none means the answer did not reach its end."""
    if not stop_reason:
        return INTERRUPTED
    return MESSAGES_STOP.get(stop_reason, OTHER)


def body_ending(family: str, body: Any) -> str | None:
    """The ending of an answer body as JSON (the batch runner and the ledger read bodies, not typed
    results); None when the body is not a chat, responses or messages answer (a listing, a delete)."""
    if not isinstance(body, Mapping):
        return None
    if family == "chat" and isinstance(body.get("choices"), list):
        choices = [c for c in body["choices"] if isinstance(c, Mapping)]
        messages = [m for c in choices if isinstance(m := c.get("message"), Mapping)]
        return chat_ending((c.get("finish_reason") for c in choices),
                           refused=any(m.get("refusal") for m in messages))
    if family == "responses" and isinstance(body.get("output"), list):
        return responses_ending(body.get("status"), body.get("incomplete_details"),
                                refused=any(_has_refusal(item) for item in body["output"]))
    if family == "messages" and (body.get("type") == "message" or "stop_reason" in body):
        return messages_ending(body.get("stop_reason"))
    return None


def _has_refusal(item: Any) -> bool:
    if not isinstance(item, Mapping) or item.get("type") != "message":
        return False
    return any(isinstance(part, Mapping) and part.get("type") == "refusal" for part in item.get("content") or ())


_ORDER = {ending: rank for rank, ending in enumerate((INTERRUPTED, FILTERED, REFUSED, CAPPED, OTHER, COMPLETE))}


def _least(endings: list[str]) -> str:
    return min(endings, key=lambda ending: _ORDER.get(ending, 0))
