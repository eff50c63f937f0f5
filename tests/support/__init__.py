"""What the tests share: one way to start each server, one bounded wait, one set of model ids.

- `gateways`: the embedded gateway as a subprocess (keys, request log); `servers`: third-party servers;
  `task_app`: a differently shaped task API in a thread; `postgres`: PostgreSQL, skipped where missing;
  `lab`: JupyterLab and Chromium for the browser tests.
- `models`: model ids, read from gwlab's tables; `tickets`: frames and questions.
- `fakes`, `faces`, `streams`, `fault_proxy`, `billing`: fault injection and what it is checked against.
- The fixed-latency gateway and the dask cluster live in bench/harness (bench imports no test module);
  tests import them from there, and `free_port`, `wait_until` (and its async twin) from here.
"""

from bench.harness.loopback import free_port, wait_until, wait_until_async

__all__ = ["free_port", "wait_until", "wait_until_async"]
