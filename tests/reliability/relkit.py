"""Shared by the reliability tests (imported by name, not a conftest: sibling conftests share one name)."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
from faultproxy import Exchange

import gwlab.frames.accessor  # noqa: F401  (registers df.gw)


def _root_conftest() -> ModuleType:
    """tests/conftest.py itself: in a whole-suite run `from gatewaykit import` can find a sibling folder's
    conftest (the last one pytest imported), so it is looked up by file."""
    path = (Path(__file__).parent.parent / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return module
    spec = importlib.util.spec_from_file_location("gwlab_tests_root_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_root = _root_conftest()
RunningGateway = _root.RunningGateway
start_gateway, stop_gateway = _root.start_gateway, _root.stop_gateway
RequestLog = _root.RequestLog

DECIDE, TEXT, VIDEO, REALTIME = ("local/decide-e5-small", "local/gemma-3-270m", "local/video-preview",
                                 "local/realtime-gemma-3-270m")
QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is this urgent?"},
             "team": {"type": "choice", "instructions": "Which team should handle it?",
                      "criteria": {"billing": "payments, invoices and refunds", "tech": "bugs and errors"}}}


def tickets(rows: int, tag: str = "") -> pd.DataFrame:
    """`rows` distinct tickets (distinct bodies, so each row is its own request)."""
    return pd.DataFrame({"ticket": [f"{tag}Ticket {i}: checkout fails with error {i * 7}" for i in range(rows)]})


def make_key(db: Path, name: str, models: str | None = None) -> str:
    """A key created in the gateway's database from this process (the CLI's subprocess costs seconds);
    a running gateway reads keys per request, so it works at once."""
    from gwlab.local.store import Store

    store = Store(str(db))
    try:
        return store.create_key(f"{name}-{uuid.uuid4().hex[:6]}", models.split(",") if models else None)
    finally:
        store.close()


def set_key(db: Path, key: str, action: str) -> None:
    """Disable or delete a key (given by its secret) in the gateway's database."""
    from gwlab.local.store import Store

    store = Store(str(db))
    try:
        record = store.find_key(key)
        assert record is not None
        done = store.set_key_status(record.name, "disabled") if action == "disable" else \
            store.delete_key(record.name)
        assert done
    finally:
        store.close()



def serve(db: Path, *args: str, key: str | None = None) -> Any:
    """`gwlab serve` on `db` (like conftest's start_gateway, with the key made in-process: the CLI's
    subprocess costs seconds on a busy machine); `key` reuses a key already in the database."""
    return _root.serve(db, key or make_key(db, "reliability"), *args)


@contextmanager
def own_gateway(db: Path, *args: str) -> Iterator[Any]:
    """A gateway of the test's own (its request log holds only the test's requests). The process may be
    replaced meanwhile (a restart on the same port): the one running at the end is stopped."""
    running = serve(db, *args)
    try:
        yield running
    finally:
        stop_gateway(running)


@dataclass(frozen=True)
class Billing:
    """Billed requests (status-200 rows of the gateway's request log) grouped by the body that was sent.

    A log row holds no body, so each row is joined, through the `x-request-id` the gateway answered
    with, to the proxy's record of the request: the SHA-256 of the exact bytes the gateway received."""

    per_body: Counter[str]  # body hash -> status-200 rows billed for it
    delivered: Counter[str]  # body hash -> answers the client received whole
    lost: Counter[str]  # body hash -> answers billed but cut (or held) before they reached the client whole
    unmatched: int  # 200 rows without a proxy record (must be 0)
    billed_tokens: int

    @property
    def duplicates(self) -> int:
        """Billed rows beyond the first per distinct body."""
        return sum(n - 1 for n in self.per_body.values() if n > 1)

    @property
    def delivered_twice(self) -> int:
        """Bodies whose answer reached the client more than once (a real duplicate: must be 0)."""
        return sum(1 for n in self.delivered.values() if n > 1)


def billing(log_rows: list[dict[str, Any]], exchanges: list[Exchange]) -> Billing:
    by_id = {e.request_id: e for e in exchanges if e.request_id}
    per_body: Counter[str] = Counter()
    unmatched = tokens = 0
    for row in log_rows:
        if row["status"] != 200:
            continue
        tokens += row["input_tokens"] or 0
        exchange = by_id.get(row["request_id"])
        if exchange is None:
            unmatched += 1
            continue
        per_body[exchange.body_sha] += 1
    delivered = Counter(e.body_sha for e in exchanges if e.status == 200 and e.delivered)
    lost = Counter(e.body_sha for e in exchanges if e.status == 200 and not e.delivered)
    return Billing(per_body, delivered, lost, unmatched, tokens)
