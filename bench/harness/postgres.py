"""A real PostgreSQL server for tests: Debian's binaries, a temporary data directory, a loopback port.

As root (CI) the server runs as the `postgres` user, as PostgreSQL requires; the data directory is a
fresh `mkdtemp` owned by that user. `missing()` says why no server can start (tests skip with it,
tests/support/postgres.py; a benchmark stops with it).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .loopback import free_port


def binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None



@dataclass
class PostgresServer:
    """A running server: `url(db)` addresses one database on it."""

    port: int
    data: Path
    bin: Path
    user: str | None  # the OS user the server runs as (None: this process's user)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database (no tables yet), and its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data / "db"), "-A", "trust", "-U", "postgres", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data / "db"), "-l", str(self.data / "log"), "-w", "-t", "60",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.data} -c fsync=off", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data / "db"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.data, ignore_errors=True)


def missing() -> str | None:
    """Why no server can be started here (the driver or the binaries are missing), or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is in the dask extra: pip install -e '.[dask]'"
    if binaries() is None:
        return "no PostgreSQL binaries (initdb, pg_ctl): run `make db-deps` (apt-get install postgresql)"
    return None


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A started server, stopped (and its directory removed) at the end; RuntimeError saying why if none can."""
    reason = missing()
    bin_dir = binaries()
    if reason is not None or bin_dir is None:
        raise RuntimeError(f"PostgreSQL cannot start: {reason}")
    user = "postgres" if os.geteuid() == 0 else None
    data = Path(tempfile.mkdtemp(prefix="gwlab-pg-"))
    if user:
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(free_port(), data, bin_dir, user)
    try:
        server.start()
    except subprocess.CalledProcessError as exc:
        log = data / "log"
        detail = log.read_text() if log.exists() else ""
        shutil.rmtree(data, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr}{detail}") from exc
    try:
        yield server
    finally:
        server.stop()
