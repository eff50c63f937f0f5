"""Turns on the text engine (gwlab/local/engines/turns.py): owners are served round-robin, a holder yields
only to another owner and only after its quantum, and the one just served goes behind everyone waiting."""

from __future__ import annotations

import threading

import pytest

from gwlab.local.engines import turns
from gwlab.local.engines.turns import Ticket, Turns
from tests.support import wait_until


@pytest.fixture(autouse=True)
def no_quantum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "QUANTUM_S", 0.0)


def _queue(engine: Turns, owner: str, served: list[str]) -> threading.Thread:
    """A thread that waits for a turn as `owner`, records it and gives it back."""
    def run() -> None:
        ticket = engine.take(owner)
        served.append(owner)
        engine.give_back(ticket)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _waiting(engine: Turns, count: int) -> None:
    wait_until(lambda: sum(len(q) for q in engine._waiting.values()) == count, timeout=10, what=f"{count} waiting")


def test_owners_are_served_round_robin_and_the_last_served_goes_behind() -> None:
    engine, served = Turns(), []
    first = engine.take("a")
    threads = []
    for owner in ("a", "b", "c"):  # a's second request arrived first, yet b and c go before it
        threads.append(_queue(engine, owner, served))
        _waiting(engine, len(threads))
    engine.give_back(first)
    for thread in threads:
        thread.join(timeout=10)
    assert served == ["b", "c", "a"]
    assert engine.idle()


def test_a_holder_yields_only_to_another_owner() -> None:
    engine, served = Turns(), []
    ticket: Ticket = engine.take("a")
    assert not engine.should_yield(ticket)  # nobody waits
    same = _queue(engine, "a", served)
    _waiting(engine, 1)
    assert not engine.should_yield(ticket)  # only its own key's next request
    other = _queue(engine, "b", served)
    _waiting(engine, 2)
    assert engine.should_yield(ticket)
    assert engine.holder() == "a"
    engine.give_back(ticket)
    for thread in (same, other):
        thread.join(timeout=10)
    assert served == ["b", "a"]


def test_a_holder_keeps_its_turn_for_its_quantum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "QUANTUM_S", 3600.0)
    engine, served = Turns(), []
    ticket = engine.take("a")
    other = _queue(engine, "b", served)
    _waiting(engine, 1)
    assert not engine.should_yield(ticket)
    engine.give_back(ticket)
    other.join(timeout=10)
    assert served == ["b"] and engine.idle()
