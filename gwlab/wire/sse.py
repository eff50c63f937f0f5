"""Server-sent events: bytes in, events out, by the WHATWG event-stream rules (protocols.md §1).

Why not line by line like the SDK decoders: an event is dispatched only at a blank line, so the
decoder keeps raw bytes until a chunk brings a blank line, then decodes every complete event at
once. Between feeds the only state is those pending bytes, the last event ID and a CR seen at the
end of a chunk; a UTF-8 character split across chunks is whole by the time it is decoded, because
no byte of a multi-byte character is ever LF. Most events of a model stream are one `data: {...}`
line; they take fast paths that do their work in C (`bytes.split`, `map`), not per character.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple

__all__ = ["Event", "SSEDecoder", "UnknownEvent", "decode"]


class Event(NamedTuple):
    """One dispatched event. `event` is "message" when no `event:` line named it (WHATWG default)."""

    event: str
    data: str
    id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        """The data parsed as JSON (raises ValueError when it is not)."""
        return json.loads(self.data)


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """A stream event no family parser knows (or a payload that is not JSON): kept, never dropped."""

    type: str
    raw: Any = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """Text this event adds to the answer: none, since its meaning is unknown."""
        return ""


_new = tuple.__new__  # builds an Event in C, skipping NamedTuple's Python-level __new__
_BOM = b"\xef\xbb\xbf"
_LF, _CR = 10, 13


class SSEDecoder:
    """Incremental decoder: `feed(chunk)` returns the events completed by that chunk; `close()` ends.

    `last_event_id` persists across events (an `id` value holding NUL is ignored); `retry` is the
    last valid reconnection time in ms. `discarded_bytes` counts what `close()` threw away, so a
    caller can tell a clean end from one that cut an event short.
    """

    __slots__ = ("_clean", "_cr", "_pending", "_pending_size", "_started", "discarded_bytes",
                 "last_event_id", "retry")

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._cr = False  # the previous chunk ended in CR: a LF opening the next one is its pair
        self._started = False  # a BOM is stripped only at the very start of the stream
        self._clean = False  # no pending bytes, no CR carried, BOM check done: the fast path may run
        self.last_event_id = ""
        self.retry: int | None = None
        self.discarded_bytes = 0

    @property
    def pending_bytes(self) -> int:
        """Bytes received but not yet part of a dispatched event."""
        return self._pending_size

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next bytes of the stream; return the events they complete, in order."""
        if (
            self._clean and chunk.startswith(b"data: ") and chunk.find(_LF) == len(chunk) - 2
            and chunk[-1] == _LF and _CR not in chunk
        ):
            # fast path: the chunk is exactly one single-line `data:` event (a server flushing each)
            data = chunk[6:-2].decode("utf-8", "replace")
            return [_new(Event, ("message", data, self.last_event_id, None))]
        if not chunk:
            return []
        if self._cr:
            self._cr = False
            if chunk[0] == _LF:  # the LF of a CRLF split across chunks
                chunk = chunk[1:]
                if not chunk:
                    return []
        if _CR in chunk:
            self._cr = chunk[-1] == _CR
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pending = self._pending
        end = chunk.rfind(b"\n\n")
        if end >= 0:
            if pending:
                pending.append(chunk[:end])
                block = b"".join(pending)
                pending.clear()
            else:
                block = chunk[:end]
            rest = chunk[end + 2 :]
        elif pending and chunk[0] == _LF and pending[-1][-1] == _LF:
            block = b"".join(pending)[:-1]  # the blank line straddles the boundary: "…\n" | "\n…"
            pending.clear()
            rest = chunk[1:]
        else:
            pending.append(chunk)
            self._pending_size += len(chunk)
            self._clean = False
            return []
        if rest:
            pending.append(rest)
        self._pending_size = len(rest)
        events = self._events(block)
        self._clean = not rest and not self._cr
        return events

    def close(self) -> list[Event]:
        """End of stream: bytes after the last blank line are discarded, never dispatched."""
        self.discarded_bytes += self._pending_size
        self._pending.clear()
        self._pending_size = 0
        self._cr = False
        self._clean = self._started
        return []

    def _events(self, block: bytes) -> list[Event]:
        """Events of `block`: whole lines (LF-terminated, CR already gone), ending before a blank line."""
        if not self._started:
            self._started = True
            if block.startswith(_BOM):
                block = block[3:]
        if block.startswith(b"data: "):
            # fast path: every event is one `data: ` line, i.e. once split at "\n\ndata: " no piece
            # holds another LF.
            datas = block[6:].split(b"\n\ndata: ")
            if not any(map(bytes.__contains__, datas, repeat(_LF))):
                try:
                    texts = list(map(bytes.decode, datas))
                except UnicodeDecodeError:  # invalid UTF-8 becomes U+FFFD, as everywhere else
                    texts = list(map(str, datas, repeat("utf-8"), repeat("replace")))
                return list(map(_new, repeat(Event), zip(repeat("message"), texts,
                                                          repeat(self.last_event_id), repeat(None))))
        out: list[Event] = []
        append = out.append
        last_id = self.last_event_id
        for part in block.decode("utf-8", "replace").split("\n\n"):
            if part.startswith("data: ") and "\n" not in part:
                append(_new(Event, ("message", part[6:], last_id, None)))
            elif part.startswith("event: ") and part.count("\n") == 1 and "\ndata: " in part:
                name, _, data = part[7:].partition("\ndata: ")  # responses and messages streams
                append(_new(Event, (name or "message", data, last_id, None)))
            else:
                event = self._interpret(part)
                last_id = self.last_event_id
                if event is not None:
                    append(event)
        return out

    def _interpret(self, part: str) -> Event | None:
        """The general case: every line of one event's text, then its dispatch."""
        name = ""
        data: list[str] | None = None
        retry: int | None = None
        for line in part.split("\n"):
            # a blank line can only lead or end `part` (3+ line ends in a row): it dispatches an
            # empty buffer or the same one the end of `part` dispatches, so skipping it is exact
            if not line or line[0] == ":":
                continue
            field, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if field == "data":
                if data is None:
                    data = [value]
                else:
                    data.append(value)
            elif field == "event":
                name = value
            elif field == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif field == "retry" and value.isascii() and value.isdigit():
                self.retry = retry = int(value)
            # any other field is ignored
        if data is None:  # WHATWG: an event whose data buffer is empty is not dispatched
            return None
        return Event(name or "message", "\n".join(data), self.last_event_id, retry)


def decode(payload: bytes) -> list[Event]:
    """Every event of a whole stream held in memory (for tests and replays)."""
    decoder = SSEDecoder()
    return decoder.feed(payload) + decoder.close()
