"""PostgreSQL for tests: the server bench/harness/postgres.py starts, skipped (saying why) where it cannot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.harness.postgres import PostgresServer, missing, running_postgres

__all__ = ["PostgresServer", "postgres_server"]


def postgres_server() -> Iterator[PostgresServer]:
    """A server for the caller's fixture (`yield from postgres_server()`); skips where none can start."""
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    with running_postgres() as server:
        yield server
