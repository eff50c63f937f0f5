"""Bring a gateway database written by an older gwlab up to the current schema, once, when it is opened.

Before issue 30, `keys.id` was a plain `INTEGER PRIMARY KEY`: deleting the newest key and creating another
handed out the same id, and the new key inherited the deleted key's responses, tasks and tokens. Ids now
come from `AUTOINCREMENT` (never reused); an old file is rebuilt so, its orphaned rows (owned by no
existing key) are deleted, and the sequence starts above every id any table ever recorded, so even the
request log of a key deleted before the upgrade never merges with a new key's."""

from __future__ import annotations

import sqlite3

_KEYS_V2 = """
CREATE TABLE keys_v2 (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL, prefix TEXT NOT NULL,
    hash TEXT UNIQUE NOT NULL, models TEXT, status TEXT NOT NULL DEFAULT 'active', created_at REAL NOT NULL)
"""
# every table that names a key by its id; the request log keeps its rows (an audit trail), the rest are data
OWNED = ("responses", "tasks", "ephemeral_tokens")
_KEY_ID_TABLES = (*OWNED, "request_log")


def migrate(conn: sqlite3.Connection) -> None:
    """Run inside one `BEGIN IMMEDIATE` transaction (the caller's), so two processes opening the same old
    file at once migrate it once."""
    if "key_hash" not in _columns(conn, "ephemeral_tokens"):
        # tokens minted before the upgrade have no key identity and are refused (they live one minute)
        conn.execute("ALTER TABLE ephemeral_tokens ADD COLUMN key_hash TEXT")
    if "AUTOINCREMENT" in _table_sql(conn, "keys").upper():
        return
    conn.execute(_KEYS_V2)
    conn.execute("INSERT INTO keys_v2 SELECT id, name, prefix, hash, models, status, created_at FROM keys")
    conn.execute("DROP TABLE keys")
    conn.execute("ALTER TABLE keys_v2 RENAME TO keys")
    purge_orphans(conn)
    highest = max(conn.execute(f"SELECT COALESCE(MAX({column}), 0) FROM {table}").fetchone()[0]
                  for table, column in (("keys", "id"), *((t, "key_id") for t in _KEY_ID_TABLES)))
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'keys'")
    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('keys', ?)", (highest,))


def purge_orphans(conn: sqlite3.Connection) -> None:
    """Delete the data of keys that no longer exist (files of tasks that no longer exist included)."""
    for table in OWNED:
        conn.execute(f"DELETE FROM {table} WHERE key_id IS NULL OR key_id NOT IN (SELECT id FROM keys)")
    conn.execute("DELETE FROM task_content WHERE task_id NOT IN (SELECT id FROM tasks)")


def _table_sql(conn: sqlite3.Connection, table: str) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row[0] if row else ""


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
