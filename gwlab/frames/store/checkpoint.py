"""Answers already paid for, in SQLite, so a re-run or a resumed run sends only what is missing.

Key: SHA-256 of the gateway (its normalized base URL, `gateway_id`), the endpoint and the canonical JSON
body (sorted keys, compact; the body holds the model), plus the repeat index for the extra asks of
`repeats=k`. An answer is one gateway's: two gateways serving the same model id (staging and production,
the local one and a hosted one) never share answers. The embedded gateway's is its identity instead
(`local:...`, frames/_client.checkpoint_origin), which a restart on another port keeps. Files written
before the gateway was part of the key keep their rows (their `gateway` column is NULL) but no key can
reach them: they are never served.

Each answer is written the moment it arrives, off the event loop: `put` hands it to the store's writer
thread, which commits every answer queued while its previous transaction ran in the next one (group
commit), and returns a future that resolves once that transaction is committed. The runner counts a row
done only then, and keeps sending meanwhile, so durable writes cost the run almost nothing (docs/benchmarks.md).
WAL mode with synchronous=NORMAL keeps committed rows through a process crash or kill (only a power
loss may drop the last commits), and lets several processes (dask workers) share the file.

Each store also keeps the run records (`gwlab.frames.run.records`): one row per `df.gw` run, appended when it
ends and never changed (the SQLite table refuses updates and deletes), in table `runs` (`gwlab_runs`).

Two implementations of one small interface (`AnswerStore`), chosen by `open_checkpoint` (stores.py): a
path is this SQLite file (one machine), a `postgresql://` URL a PostgreSQL database every host can reach
(`checkpoint_postgres.PostgresCheckpoint`). Same key, same commit-on-arrival rule.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["AnswerStore", "Checkpoint", "CommitOnArrival", "Entry", "canonical", "gateway_id", "is_store_url", "key_of",
           "mask_url", "request_key"]

_URL_SCHEMES = ("postgresql://", "postgres://")
# an answer's row as `put` queues it, and the future its commit resolves (None: nobody waits on it)
_Queued = tuple[tuple[Any, ...], "concurrent.futures.Future[None] | None"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT, response TEXT NOT NULL, request_id TEXT,
    input_tokens INTEGER, output_tokens INTEGER, created REAL NOT NULL, writes INTEGER NOT NULL DEFAULT 1,
    gateway TEXT);
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, started TEXT NOT NULL, record TEXT NOT NULL,
    detail TEXT);
CREATE TRIGGER IF NOT EXISTS runs_append_only BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'run records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS runs_keep_all BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'run records are append-only'); END;
"""
_UPSERT = """
INSERT INTO answers (key, endpoint, model, response, request_id, input_tokens, output_tokens, created, gateway)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET response = excluded.response, request_id = excluded.request_id,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, created = excluded.created,
    gateway = excluded.gateway, writes = answers.writes + 1
"""


def canonical(body: Mapping[str, Any]) -> str:
    """The body as canonical JSON: sorted keys, no spaces, UTF-8 kept (the same request, the same text)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def gateway_id(base_url: str) -> str:
    """A gateway's identity in the checkpoint: its base URL with scheme and host lower-cased, a default
    port and trailing slashes dropped (`HTTP://Host:80/v1/` and `http://host/v1` are one gateway); words
    after the URL (a fixed decisions route, "decisions_path=/systemone") are kept as they are."""
    url, _, qualifier = base_url.strip().partition(" ")
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    normalized = urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))
    return f"{normalized} {qualifier.strip()}" if qualifier.strip() else normalized


def request_key(gateway: str, endpoint: str, body: Mapping[str, Any], repeat: int = 0) -> str:
    """Checkpoint key of one request to one gateway (`gateway_id`); repeat 0 is the plain request,
    shared with runs without repeats."""
    return key_of(gateway, endpoint, canonical(body), repeat)


def key_of(gateway: str, endpoint: str, canonical_body: str, repeat: int = 0) -> str:
    """`request_key` for a body already in canonical text. The `gateway=` line also makes every key
    differ from the keys of files written before the gateway was part of it, so those are never served."""
    text = f"gateway={gateway}\n{endpoint}\n{canonical_body}" + (f"\n#repeat={repeat}" if repeat else "")
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored answer: the gateway's JSON body as received, what it cost, which gateway gave it, when."""

    response: str
    request_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    created: float | None = None  # epoch seconds when the answer arrived
    gateway: str | None = None  # `gateway_id` of the gateway that answered

    def data(self) -> Any:
        return json.loads(self.response)


@runtime_checkable
class AnswerStore(Protocol):
    """What the runner needs of a checkpoint: read answers, claim a request, store an answer on arrival."""

    path: Any  # where it lives, for the run summary (a URL with its password masked)

    def get(self, key: str) -> Entry | None: ...

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]: ...

    def has_many(self, keys: Iterable[str]) -> set[str]: ...

    async def claim(self, key: str) -> Entry | None:
        """Before sending: None once this run may ask `key`; the answer if another worker stored it."""
        ...

    def release(self, key: str) -> None:
        """Give up a claim without an answer (the request failed or was not sent)."""
        ...

    def put(self, key: str, endpoint: str, model: str | None, response: str, request_id: str | None,
            input_tokens: int | None, output_tokens: int | None,
            gateway: str | None = None) -> concurrent.futures.Future[None] | None:
        """Queue an answer; the future (if any) resolves once it is committed."""
        ...

    def flush(self) -> None:
        """Return once every answer queued so far is committed (raise what a commit raised)."""
        ...

    def close(self) -> None: ...


def is_store_url(spec: object) -> bool:
    """Whether a `checkpoint=` value names a database server rather than a file."""
    return isinstance(spec, str) and spec.lower().startswith(_URL_SCHEMES)


def mask_url(url: str) -> str:
    """The URL with its password replaced by `***`: what a repr, a log line or an error may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


def _resolve(group: list[_Queued], failed: BaseException | None) -> None:
    for _, done in group:
        if done is not None:
            done.set_result(None) if failed is None else done.set_exception(failed)


class CommitOnArrival:
    """`put` and `flush` for both stores: a writer thread commits queued answers in groups, each group in
    one transaction (`_writer_session`, the store's), as soon as the previous one is done.

    `put` returns a future resolved when its answer's transaction commits (or failed with the commit's
    error; the answer then stays queued for the next `flush`, which raises if it fails again). The thread
    starts on the first `put` and ends after a second idle, so a store nobody closes holds no thread.

    Waking the writer for every answer cost the run's loop thread ~100 µs an answer (a thread switch and
    the GIL handed over, docs/benchmarks.md): the writer lingers up to `LINGER_SECONDS` after an answer
    arrives to gather more into one transaction, and is woken at once only by `urge` (someone waits for
    a commit now: the runner before holding a second answer of a worker), by `flush`, or by a full group.
    `put` itself takes no lock unless the writer sleeps idle (or must start, or a group is full): taking
    the writer's lock for every answer made the loop thread wait for the writer thread to get the GIL
    back and release it, ~100 µs an answer at a few answers a group (the queue is a deque, whose append
    and popleft are atomic; the writer says it sleeps idle before it looks at the queue, and `put`
    appends before it looks whether the writer sleeps, so one of the two always sees the other)."""

    IDLE_SECONDS = 1.0
    LINGER_SECONDS = 0.005
    GROUP = 64

    def _init_writer(self) -> None:
        self._ready = threading.Condition()
        self._queue: collections.deque[_Queued] = collections.deque()
        self._committing = False
        self._failed: BaseException | None = None  # the last commit's error: the writer waits for `flush`
        self._writer: threading.Thread | None = None
        self._idle = False  # the writer sleeps until an answer comes: a `put` must wake it
        self._stopping_writer = False
        self._urgent = False  # a caller waits for the queued answers: commit them without lingering
        self.written = 0

    def put(self, key: str, endpoint: str, model: str | None, response: str, request_id: str | None,
            input_tokens: int | None, output_tokens: int | None,
            gateway: str | None = None) -> concurrent.futures.Future[None]:
        """Queue an answer and the `gateway_id` that gave it; the future resolves once it is committed."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        row = (key, endpoint, model, response, request_id, input_tokens, output_tokens, time.time(), gateway)
        self._queue.append((row, done))
        if self._writer is None or self._idle or len(self._queue) >= self.GROUP:
            with self._ready:
                if self._writer is None:
                    self._start_writer()
                else:
                    self._ready.notify_all()  # an idle writer starts its linger; a full group ends it
        return done

    def urge(self) -> None:
        """Commit what is queued now rather than after the writer's linger (a caller waits for it)."""
        with self._ready:
            self._urgent = True
            self._ready.notify_all()

    def _write(self) -> None:
        """The writer thread: take everything queued, commit it in one transaction, resolve its futures."""
        try:
            with self._writer_session() as commit:
                while self._next_group(commit):
                    pass
        except BaseException as exc:  # the store could not be opened: every waiter hears it
            with self._ready:
                self._failed, self._writer, self._committing = exc, None, False
                waiting = self._take_queue()
                self._queue.extendleft(reversed([(row, None) for row, _ in waiting]))
                self._ready.notify_all()
            _resolve(waiting, exc)

    def _take_queue(self) -> list[_Queued]:
        """Everything queued so far (answers a `put` adds meanwhile stay for the next group)."""
        return [self._queue.popleft() for _ in range(len(self._queue))]

    def _next_group(self, commit: Callable[[list[tuple[Any, ...]]], None]) -> bool:
        """Commit the next group; False when idle for a while (or told to stop): the thread ends."""
        with self._ready:
            self._idle = True  # before looking at the queue: a `put` after this wakes the writer
            working = self._ready.wait_for(self._work_or_stop, self.IDLE_SECONDS)
            if not working or not self._queue:
                self._writer = None  # `_idle` stays set: a `put` that still sees this writer takes the lock
                self._ready.notify_all()
                return False
            self._idle = False
            self._ready.wait_for(self._group_or_urged, self.LINGER_SECONDS)
            group, self._committing, self._urgent = self._take_queue(), True, False
        # from here on a waiter can no longer cancel its future (a cancelled one is left out)
        group = [(row, done if done is None or done.set_running_or_notify_cancel() else None) for row, done in group]
        _resolve(group, self._commit_group(commit, group))
        return True

    def _group_or_urged(self) -> bool:
        return self._urgent or len(self._queue) >= self.GROUP or self._stopping_writer

    def _work_or_stop(self) -> bool:
        return bool(self._queue and self._failed is None) or self._stopping_writer

    def _commit_group(self, commit: Callable[[list[tuple[Any, ...]]], None], group: list[Any]) -> BaseException | None:
        try:
            commit([row for row, _ in group])
            failed: BaseException | None = None
        except BaseException as exc:  # handed to the waiting futures and to `flush`
            failed = exc
        with self._ready:
            self._committing = False
            if failed is None:
                self.written += len(group)
            else:  # kept for the next flush, which tries again and raises if it fails again
                self._queue.extendleft(reversed([(row, None) for row, _ in group]))
                self._failed = failed
            self._ready.notify_all()
        return failed

    def flush(self) -> None:
        """Return once everything queued so far is committed; a failed commit is tried once more here,
        and raised if it fails again."""
        with self._ready:
            self._urgent = True
            self._ready.notify_all()
            if self._failed is not None:
                self._failed = None
            if self._queue and self._writer is None:
                self._start_writer()
            self._ready.wait_for(lambda: (not self._queue and not self._committing) or self._failed is not None)
            failed = self._failed
        if failed is not None:
            raise failed

    def _start_writer(self) -> None:  # with self._ready held
        self._stopping_writer, self._idle = False, False
        self._writer = threading.Thread(target=self._write, name=f"gwlab checkpoint {self!r}", daemon=True)
        self._writer.start()

    def _stop_writer(self) -> None:
        """Flush, then end the writer thread now rather than after its idle second."""
        self.flush()
        with self._ready:
            writer, self._stopping_writer = self._writer, True
            self._ready.notify_all()
        if writer is not None and writer is not threading.current_thread():
            writer.join()

    def _writer_session(self) -> contextlib.AbstractContextManager[Callable[[list[tuple[Any, ...]]], None]]:
        """What the writer thread commits with, for its life: a function writing rows (the `put`
        arguments and the time) in one transaction. The store's."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Checkpoint(CommitOnArrival):
    """A SQLite file of answers keyed by request; safe to share between processes of one machine.

    It keeps no claims: two processes asking the same new request at once both send it (the second
    answer overwrites the first, counted in `writes`). The PostgreSQL store claims requests.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # used from the run's event-loop thread; the lock guards the rare use from another thread
        self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._migrate()
        self._lock = threading.Lock()
        self._init_writer()

    def _migrate(self) -> None:
        """A file from before the gateway was recorded gets the column; its old rows stay NULL there and
        unreachable (their keys lack the gateway). Two processes may race to add it: one wins."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(answers)")}
        if "gateway" in columns:
            return
        try:
            self._conn.execute("ALTER TABLE answers ADD COLUMN gateway TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise

    def get(self, key: str) -> Entry | None:
        with self._lock:
            row = self._conn.execute("SELECT response, request_id, input_tokens, output_tokens, created, gateway "
                                     "FROM answers WHERE key = ?", (key,)).fetchone()
        return Entry(*row) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Entry]:
        """Entries for the keys that are stored (in chunks: SQLite caps the number of parameters)."""
        keys = list(keys)
        found: dict[str, Entry] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT key, response, request_id, input_tokens, output_tokens, created, gateway "
                    f"FROM answers WHERE key IN ({marks})", chunk).fetchall()
            found.update((row[0], Entry(*row[1:])) for row in rows)
        return found

    def has_many(self, keys: Iterable[str]) -> set[str]:
        keys = list(keys)
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            with self._lock:
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(f"SELECT key FROM answers WHERE key IN ({marks})", chunk).fetchall()
            found.update(row[0] for row in rows)
        return found

    async def claim(self, key: str) -> Entry | None:
        """No claims in a file: the caller may always send."""
        return None

    def release(self, key: str) -> None:
        """Nothing to release (no claims)."""

    @contextlib.contextmanager
    def _writer_session(self) -> Iterator[Callable[[list[tuple[Any, ...]]], None]]:
        """The writer thread's own connection (WAL: the run's reads on the other one never wait for it)."""
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")

        def commit(rows: list[tuple[Any, ...]]) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_UPSERT, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        try:
            yield commit
        finally:
            conn.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def add_run(self, run_id: str, started: str, record: str, detail: str | None) -> None:
        """Append one run: its facts and its answer keys (JSON texts); an existing run is never changed."""
        with self._lock:
            self._conn.execute("INSERT INTO runs (run_id, started, record, detail) VALUES (?, ?, ?, ?)",
                               (run_id, started, record, detail))

    def run_records(self) -> list[str]:
        """Every run's facts (JSON text), oldest first."""
        with self._lock:
            return [row[0] for row in self._conn.execute("SELECT record FROM runs ORDER BY seq")]

    def run_detail(self, run_id: str) -> str | None:
        """One run's answer keys, statuses and index (JSON text)."""
        with self._lock:
            row = self._conn.execute("SELECT detail FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._stop_writer()
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r})"
