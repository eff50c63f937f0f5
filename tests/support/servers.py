"""Third-party gateways as test subprocesses on loopback: llama-cpp-python's server, laya-serve, LiteLLM's proxy.

Each server is a real PyPI package started the way its docs say (NOTES.md, "Third-party servers"), with a random
key that is passed through the environment (never argv, a file or a log line) and a bounded wait for readiness:
`GET /v1/models` must answer 200 before the deadline, else the error carries the tail of the server's stderr
(with the key scrubbed out) so a failed start says why.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import gwlab
from bench.harness.loopback import free_port, wait_until
from tests.support.processes import start_owned

REPO = Path(__file__).resolve().parents[2]  # tests/support/..
BYO_VENV = REPO / ".venv-byo"  # LiteLLM's own venv, built by `make byo` (tests/byo/requirements-litellm.txt)
LAUNCH_LLAMA = Path(__file__).with_name("llama_launcher.py")
READY_SECONDS = 180.0  # LiteLLM's proxy imports ~100 packages: ~20-40 s on 2 busy cores
LLAMA_ALIAS = "gemma-3-270m"  # the name llama-cpp-python's server lists (it answers any name anyway)
LAYA_MODEL = "jev-latest"  # laya-serve's fake backend


@dataclass
class RunningServer:
    """One third-party server: where it listens, its key (never printed), its model ids and its process."""

    name: str
    base_url: str  # http://127.0.0.1:PORT/v1
    api_key: str = field(repr=False)
    models: tuple[str, ...]
    process: subprocess.Popen[bytes] = field(repr=False)
    log: Path = field(repr=False)

    @property
    def model(self) -> str:
        return self.models[0]

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines, self.api_key)


def connect(server: RunningServer, **options: Any) -> gwlab.Gateway:
    """gwlab as a user reaches this server: its base URL and key, nothing else unless `options` say so."""
    return gwlab.connect(base_url=server.base_url, api_key=server.api_key, **options)



def new_key(prefix: str = "sk-byo-") -> str:
    """A random key per server and session (LiteLLM wants master keys to start with sk-)."""
    return prefix + secrets.token_hex(16)


def start(name: str, argv: Sequence[str], env: Mapping[str, str], port: int, key: str, models: Sequence[str],
          log: Path, *, ready_seconds: float = READY_SECONDS) -> RunningServer:
    """Start `argv`, wait for an authorised `GET /v1/models` to answer 200, and return the running server."""
    with log.open("wb") as out:
        process = start_owned(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)  # dies with the test process, even when it is killed
    server = RunningServer(name, f"http://127.0.0.1:{port}/v1", key, tuple(models), process, log)
    try:
        _wait_ready(server, ready_seconds)
    except BaseException:
        stop(server)
        raise
    return server


def _wait_ready(server: RunningServer, seconds: float) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    last = ["no answer yet"]

    def ready() -> bool:
        if not server.alive():
            raise RuntimeError(f"{server.name} exited with code {server.process.returncode} before it was ready; "
                               f"its output ends:\n{server.stderr_tail()}")
        try:
            answer = httpx.get(f"{server.base_url}/models", headers=headers, timeout=5)
        except httpx.HTTPError as exc:
            last[0] = type(exc).__name__
            return False
        last[0] = f"HTTP {answer.status_code}"
        return answer.status_code == 200

    try:
        wait_until(ready, timeout=seconds, interval=0.25, what=f"{server.name} ready")
    except AssertionError:
        raise RuntimeError(f"{server.name} was not ready within {seconds:.0f} s (last: {last[0]}); its output "
                           f"ends:\n{server.stderr_tail()}") from None


def stop(server: RunningServer) -> None:
    """SIGTERM the server's process group (uvicorn/gunicorn workers included), SIGKILL after 15 s."""
    if server.alive():
        _signal_group(server.process, signal.SIGTERM)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _signal_group(server.process, signal.SIGKILL)
            server.process.wait(timeout=15)


def kill(server: RunningServer) -> None:
    """SIGKILL, as a crash would: no shutdown, open streams are cut mid-flight."""
    _signal_group(server.process, signal.SIGKILL)
    server.process.wait(timeout=15)


def kill_after_first_text(stream: Iterable[Any], server: RunningServer) -> None:
    """Kill `server` once `stream` has given its first text (a first chunk that only names the role is
    not text), then read the stream on: a stream asked for many tokens is cut mid-way."""
    for chunk in stream:
        if chunk.text:
            break
    kill(server)
    for _ in stream:
        pass


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # start_new_session=True: the group is the server's own
        os.killpg(process.pid, sig)


def _tail(log: Path, lines: int, secret: str) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no output)"
    return "\n".join(text.splitlines()[-lines:]).replace(secret, "<key>")


# --- the three servers --------------------------------------------------------------------------------------


def start_llama_server(gguf: Path, workdir: Path, *, n_ctx: int = 1024) -> RunningServer:
    """llama-cpp-python's OpenAI-compatible server on the packaged Gemma GGUF, extra buffer types off."""
    port, key = free_port(), new_key()
    argv = [sys.executable, str(LAUNCH_LLAMA), "--model", str(gguf), "--model_alias", LLAMA_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2",
            "--n_threads_batch", "2", "--verbose", "False"]
    env = {"API_KEY": key}  # pydantic-settings reads it: the key stays out of argv (visible in ps)
    return start("llama-cpp-python server", argv, env, port, key, [LLAMA_ALIAS], workdir / "llama-server.log")


def start_laya_serve(workdir: Path, *, rate_limit_per_minute: int | None = None) -> RunningServer:
    """laya-serve 0.2.1 with its fake backend: TypeSafe System One at /v1/systemone, Bearer auth."""
    port, key = free_port(), new_key()
    executable = Path(sys.executable).with_name("laya-serve")
    # LiteLLM 1.108's laya provider only sends the names english/multilingual/typed-decisions, which laya-serve
    # 0.2.1 refuses ("expected a Jev model name or the serving model 'laya-english'") unless told to accept it
    env = {"LAYA_SERVE_BACKEND": "fake", "LAYA_SERVE_API_KEY": key, "LAYA_SERVE_EXTRA_MODELS": "english"}
    if rate_limit_per_minute is not None:
        env["LAYA_SERVE_RATE_LIMIT_PER_MINUTE"] = str(rate_limit_per_minute)
    name = "laya-serve" if rate_limit_per_minute is None else "laya-serve (rate-limited)"
    return start(name, [str(executable), "--host", "127.0.0.1", "--port", str(port)], env, port, key,
                 [LAYA_MODEL], workdir / f"laya-serve-{port}.log")


LITELLM_CHAT_MODEL = "gemma"  # routed to the llama-cpp-python server
LITELLM_DECIDE_MODEL = "decide"  # routed to gwlab's embedded gateway, OpenAI's decisions shape at /v1/decisions
LITELLM_SYSTEMONE_MODEL = "jev"  # routed to laya-serve, System One at /v1/systemone
LITELLM_BATCH_MODEL = "batches"  # gwlab's embedded gateway: OpenAI files + batches pass through to it


def litellm_config(llama: RunningServer, embedded_url: str, embedded_decide_model: str,
                   laya: RunningServer) -> str:
    """The proxy's model list. Keys are `os.environ/NAME` references, so the file holds none."""
    return f"""\
model_list:
  # first: a provider-wide call (files, batches: no model named) takes the first openai deployment's credentials
  - model_name: {LITELLM_BATCH_MODEL}
    litellm_params:
      model: openai/{embedded_decide_model}
      api_base: {embedded_url}
      api_key: os.environ/BYO_EMBEDDED_KEY
  - model_name: {LITELLM_CHAT_MODEL}
    litellm_params:
      model: openai/{llama.model}
      api_base: {llama.base_url}
      api_key: os.environ/BYO_LLAMA_KEY
      use_chat_completions_api: true
  - model_name: {LITELLM_DECIDE_MODEL}
    litellm_params:
      model: openai/{embedded_decide_model}
      api_base: {embedded_url}
      api_key: os.environ/BYO_EMBEDDED_KEY
  - model_name: {LITELLM_SYSTEMONE_MODEL}
    litellm_params:
      model: laya/english  # accepted by laya-serve through LAYA_SERVE_EXTRA_MODELS
      api_base: {laya.root}
      api_key: os.environ/BYO_LAYA_KEY
# OpenAI files + batches pass through to gwlab's embedded gateway (docs/guide/batches.md, "Behind LiteLLM"):
# uploads and downloads read files_settings; batch create/retrieve/list/cancel read OPENAI_API_BASE/KEY
files_settings:
  - custom_llm_provider: openai
    api_base: {embedded_url}
    api_key: os.environ/BYO_EMBEDDED_KEY
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
"""


def start_litellm_proxy(llama: RunningServer, embedded_url: str, embedded_key: str, embedded_decide_model: str,
                        laya: RunningServer, workdir: Path) -> RunningServer:
    """LiteLLM's proxy (its own venv) in front of the llama server, gwlab's embedded gateway and laya-serve."""
    executable = BYO_VENV / "bin" / "litellm"
    if not executable.exists():
        raise RuntimeError(f"LiteLLM's proxy is not installed at {executable}: run `make byo` (or `make test`)")
    port, key = free_port(), new_key()
    config = workdir / "litellm.yaml"
    config.write_text(litellm_config(llama, embedded_url, embedded_decide_model, laya))
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES": "True",
           "LITELLM_MASTER_KEY": key, "BYO_LLAMA_KEY": llama.api_key, "BYO_EMBEDDED_KEY": embedded_key,
           "BYO_LAYA_KEY": laya.api_key, "LITELLM_TELEMETRY": "False", "DISABLE_SCHEMA_UPDATE": "True",
           "HF_HUB_OFFLINE": "1", "NO_DOCS": "True", "OPENAI_API_BASE": embedded_url, "OPENAI_API_KEY": embedded_key}
    argv = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
            "--num_workers", "1"]
    return start("LiteLLM proxy", argv, env, port, key,
                 [LITELLM_CHAT_MODEL, LITELLM_DECIDE_MODEL, LITELLM_SYSTEMONE_MODEL], workdir / "litellm.log")
