"""Fair turns on the text engine between callers (API keys): one key's long answer cannot starve another's.

llama.cpp decodes one sequence at a time per process (`llama._generate`), so every generation takes a turn
here first. A turn is held for at least `QUANTUM_S` and then handed over, between two tokens, whenever
another owner is waiting; owners are served round-robin, each owner's requests in arrival order. A
generation that handed its turn over resumes where it stopped (`llama._generate` re-evaluates its tokens
when another sequence used the model meanwhile). The owner is the calling key's id, carried from the
request to the engine's worker thread in the context variable `OWNER` (set by `local/auth.py`)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from contextvars import ContextVar
from dataclasses import dataclass, field

OWNER: ContextVar[object] = ContextVar("gwlab_engine_owner", default=None)
QUANTUM_S = 0.25  # the least time a turn is held: each hand-over costs a re-evaluation of the prompt


@dataclass(eq=False, slots=True)
class Ticket:
    owner: object
    since: float = field(default=0.0)  # when the turn was granted (monotonic)


class Turns:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holder: Ticket | None = None
        self._waiting: OrderedDict[object, deque[Ticket]] = OrderedDict()  # owner -> tickets, by arrival
        self._served: dict[object, int] = {}  # owner -> when it last got a turn (a count): least recent goes first
        self._turns = 0

    def take(self, owner: object) -> Ticket:
        """Wait for a turn for `owner` and hold it."""
        ticket = Ticket(owner)
        with self._cond:
            self._waiting.setdefault(owner, deque()).append(ticket)
            if self._holder is None:
                self._grant_next()
            while self._holder is not ticket:
                self._cond.wait()
        return ticket

    def give_back(self, ticket: Ticket) -> None:
        with self._cond:
            if self._holder is ticket:
                self._holder = None
                self._grant_next()

    def should_yield(self, ticket: Ticket) -> bool:
        """Whether the holder of `ticket` should hand over now: its quantum is used and another owner waits."""
        if time.monotonic() - ticket.since < QUANTUM_S:
            return False
        with self._cond:
            return any(owner != ticket.owner for owner in self._waiting)

    def holder(self) -> object | None:
        """The owner whose generation holds the engine now (None when idle), for tests and diagnostics."""
        ticket = self._holder
        return None if ticket is None else ticket.owner

    def idle(self) -> bool:
        with self._cond:
            return self._holder is None and not self._waiting

    def _grant_next(self) -> None:
        """The waiting owner served least recently (never served: first), its oldest request."""
        if not self._waiting:
            return
        owner = min(self._waiting, key=lambda o: self._served.get(o, -1))  # min keeps arrival order on ties
        queue = self._waiting.pop(owner)
        ticket = queue.popleft()
        if queue:
            self._waiting[owner] = queue
        self._turns += 1
        self._served[owner] = self._turns
        ticket.since = time.monotonic()
        self._holder = ticket
        self._cond.notify_all()


TURNS = Turns()  # one per process, like llama.cpp's one decode at a time
