"""The gateway's store: a key's id is never reused, and deleting a key takes everything it owns with it,
in new databases and in databases an older gwlab wrote (migrated when opened)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gwlab.local.store import Store

# the schema before issue 30: `keys.id` without AUTOINCREMENT, tokens without the key's identity
OLD_SCHEMA = """
CREATE TABLE keys (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, prefix TEXT NOT NULL, hash TEXT UNIQUE NOT NULL,
    models TEXT, status TEXT NOT NULL DEFAULT 'active', created_at REAL NOT NULL);
CREATE TABLE responses (
    id TEXT PRIMARY KEY, key_id INTEGER, created_at REAL NOT NULL, body TEXT NOT NULL, history TEXT NOT NULL);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY, key_id INTEGER, kind TEXT NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE task_content (
    task_id TEXT NOT NULL, variant TEXT NOT NULL, media_type TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (task_id, variant));
CREATE TABLE ephemeral_tokens (
    hash TEXT PRIMARY KEY, key_id INTEGER NOT NULL, model TEXT, session TEXT NOT NULL,
    expires_at REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0);
CREATE TABLE request_log (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, request_id TEXT NOT NULL, key_id INTEGER, method TEXT NOT NULL,
    path TEXT NOT NULL, model TEXT, status INTEGER NOT NULL, latency_ms REAL NOT NULL,
    input_tokens INTEGER, output_tokens INTEGER, streamed INTEGER NOT NULL DEFAULT 0);
"""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "g.sqlite"))


def _id(store: Store, name: str) -> int:
    return next(k.id for k in store.list_keys() if k.name == name)


def _own_everything(store: Store, key_id: int) -> str:
    """A stored response, a task with a file, and a token for `key_id`; returns the token."""
    store.save_response("resp_1", key_id, {"output": "My bank PIN is 4921"}, [])
    store.save_task("video_1", key_id, "video", {"status": "completed"})
    store.save_content("video_1", "video", "video/mp4", b"frames")
    return store.create_ephemeral(key_id, None, {}, 60)[0]


def test_a_deleted_newest_keys_id_is_never_handed_out_again(store: Store) -> None:
    store.create_key("alice")
    store.create_key("dave")
    dave = _id(store, "dave")
    store.delete_key("dave")
    store.create_key("eve")
    assert _id(store, "eve") > dave


def test_deleting_a_key_deletes_what_it_owns(store: Store) -> None:
    store.create_key("dave")
    dave = _id(store, "dave")
    token = _own_everything(store, dave)
    assert store.delete_key("dave")
    assert store.load_response("resp_1", dave) is None and store.load_task("video_1", dave) is None
    assert store.load_content("video_1", "video") is None and store.redeem_ephemeral(token) is None


def test_writes_for_a_key_deleted_meanwhile_are_dropped(store: Store) -> None:
    """A render or a response in flight while its key is deleted does not bring its data back."""
    store.create_key("dave")
    dave = _id(store, "dave")
    store.delete_key("dave")
    _own_everything(store, dave)
    with sqlite3.connect(store.path) as conn:
        counts = [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("responses", "tasks", "task_content", "ephemeral_tokens")]
    assert counts == [0, 0, 0, 0]


def test_a_token_is_refused_when_its_keys_identity_changed(store: Store) -> None:
    """Tokens are bound to the key's hash, not only its integer id."""
    store.create_key("dave")
    token = store.create_ephemeral(_id(store, "dave"), None, {}, 60)[0]
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE keys SET hash = 'another key' WHERE name = 'dave'")
    assert store.redeem_ephemeral(token) is None


def test_a_token_is_spent_once(store: Store) -> None:
    store.create_key("dave")
    token = store.create_ephemeral(_id(store, "dave"), "m", {"id": "sess_1"}, 60)[0]
    assert store.redeem_ephemeral(token) == (_id(store, "dave"), "m", {"id": "sess_1"})
    assert store.redeem_ephemeral(token) is None


def _old_database(path: Path) -> None:
    """Keys 1 (alice) and 2 (bob); key 3 was deleted before the upgrade and left its data behind, and the
    request log recorded a key 5 deleted even earlier."""
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        for kid, name in ((1, "alice"), (2, "bob")):
            conn.execute("INSERT INTO keys VALUES (?, ?, 'gwl_x', ?, NULL, 'active', 0)", (kid, name, f"h{kid}"))
        conn.execute("INSERT INTO responses VALUES ('resp_old', 3, 0, '{}', '[]')")
        conn.execute("INSERT INTO responses VALUES ('resp_bob', 2, 0, '{}', '[]')")
        conn.execute("INSERT INTO tasks VALUES ('video_old', 3, 'video', 0, '{}')")
        conn.execute("INSERT INTO task_content VALUES ('video_old', 'video', 'video/mp4', x'00')")
        conn.execute("INSERT INTO ephemeral_tokens VALUES ('t', 3, NULL, '{}', 1e12, 0)")
        conn.execute("INSERT INTO request_log (ts, request_id, key_id, method, path, status, latency_ms) "
                     "VALUES (0, 'req_1', 5, 'GET', '/v1/models', 200, 1)")


def test_an_old_database_is_migrated_when_opened(tmp_path: Path) -> None:
    _old_database(tmp_path / "old.sqlite")
    store = Store(str(tmp_path / "old.sqlite"))
    assert [(k.id, k.name) for k in store.list_keys()] == [(1, "alice"), (2, "bob")]
    assert store.load_response("resp_bob", 2) is not None
    store.create_key("carol")
    assert _id(store, "carol") == 6  # above every id any table recorded: 3 (data) and 5 (the log)
    assert store.load_response("resp_old", 3) is None and store.load_task("video_old", 3) is None
    assert store.load_content("video_old", "video") is None
    store.close()
    reopened = Store(str(tmp_path / "old.sqlite"))  # a second open changes nothing
    assert [k.id for k in reopened.list_keys()] == [1, 2, 6]
