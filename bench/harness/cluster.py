"""A dask.distributed cluster of separate processes, each in its own temporary directory (tests and bench).

The scheduler and every `dask worker` are subprocesses with their own working directory, `--local-directory`
and HOME, and no path in common: a run that needed a file shared by workers would not find one. Workers
get the gateway key in their environment only (`GWLAB_API_KEY`), as on a real cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .loopback import free_port

ROOT = str(Path(__file__).resolve().parents[2])  # this checkout (bench/harness/..), so workers import its gwlab


class ProcessCluster:
    """`dask scheduler` plus `dask worker --no-nanny` processes (one thread each) on loopback."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from distributed import Client

        self._base_env = {k: v for k, v in os.environ.items()
                          if k not in ("GWLAB_API_KEY", "GWLAB_BASE_URL", "GWLAB_CHECKPOINT")}
        self._base_env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])
        self._base_env.update(env or {})
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.dirs: list[Path] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        scheduler_dir = self._own_dir("scheduler")
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
             self.address.rsplit(":", 1)[1], "--no-dashboard"],
            cwd=scheduler_dir, env={**self._base_env, "HOME": str(scheduler_dir)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = Client(self.address, timeout=120)

    def _own_dir(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"gwlab-dask-{name}-"))
        self.dirs.append(path)
        return path

    def add_worker(self, env: dict[str, str] | None = None) -> str:
        name = f"w{len(self.workers)}"
        home = self._own_dir(name)
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--name", name, "--nthreads", "1",
             "--no-nanny", "--no-dashboard", "--local-directory", str(home), "--host", "127.0.0.1"],
            cwd=home, env={**self._base_env, "HOME": str(home), **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return name

    def alive(self) -> list[str]:
        return [name for name, p in self.workers.items() if p.poll() is None]

    def ensure_workers(self, count: int, env: dict[str, str] | None = None) -> None:
        """Start workers until `count` are alive, and wait until the scheduler knows them all."""
        while len(self.alive()) < count:
            self.add_worker(env)
        self.client.wait_for_workers(count, timeout=120)

    def worker_running_tasks(self) -> str:
        """The name of a worker that is computing something now."""
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        processing = self.client.processing()
        for address, tasks in processing.items():
            if tasks and address in workers:
                return workers[address]["name"]
        raise AssertionError(f"no worker is computing: {processing}")

    def idle(self) -> bool:
        """No result held and nothing computing: a compute() now runs afresh (released results are
        forgotten asynchronously, and a key still held would be handed back instead of recomputed)."""
        return not any(self.client.has_what().values()) and not any(self.client.processing().values())

    def kill(self, name: str) -> None:
        """SIGKILL: no cleanup, no goodbye to the scheduler, sockets closed by the kernel."""
        os.kill(self.workers[name].pid, signal.SIGKILL)
        self.workers[name].wait()

    def files(self, pattern: str) -> list[Path]:
        """Files matching `pattern` in every process's own directory."""
        return [p for d in self.dirs for p in d.rglob(pattern)]

    def close(self) -> None:
        import shutil

        try:
            self.client.shutdown()  # the scheduler closes its workers, then itself
        finally:
            for process in [*self.workers.values(), self.scheduler]:
                if process.poll() is None:
                    process.terminate()
            for process in [*self.workers.values(), self.scheduler]:
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for d in self.dirs:
                shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
