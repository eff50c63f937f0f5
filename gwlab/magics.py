"""IPython magics: `%load_ext gwlab`, then `%%gw chat`, `%%gw decide`, `%gw usage`, `%gw models`.

They use the gateway the user connected: what `gwlab.connect()` returned last in this kernel
(`gwlab.current_gateway()`), so `%gw usage` lists the notebook's calls and no second
embedded gateway starts. With none connected yet, the first magic calls `gwlab.connect()` (hosted when
GWLAB_BASE_URL and GWLAB_API_KEY are set, else the process's embedded local gateway). `%gw use NAME`
(or `%gw connect NAME`) makes the magics use another Gateway variable, `--gateway NAME` one cell.
A key is never typed into a cell (cells are saved in the notebook): `%gw connect --url` reads it from
an environment variable.

A user's mistake (a bad option, an unknown variable, an invalid question, a refused request) prints
one `[gw] error: ...` line, never a traceback.

    %%gw chat --model local/gemma-3-270m --max-tokens 32 -o answer
    Q: What is the capital of France?
    A:
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from collections.abc import Mapping
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, magics_class

from gwlab.client.gateway import Gateway
from gwlab.connection import ENV_API_KEY, current_gateway
from gwlab.errors import GatewayError, InvalidRequest
from gwlab.wire.families import FAMILIES, TEXT

__all__ = ["GwMagics", "load_ipython_extension", "session_gateway", "use_gateway"]

# which family each magic speaks by default: its default model and token cap are that family's row
_MAGIC_FAMILY = {"chat": FAMILIES["chat"], "decide": FAMILIES["decisions"]}


def _default_models() -> dict[str, str]:
    """The magics' families' default models (each of them has one)."""
    return {magic: model for magic, row in _MAGIC_FAMILY.items() if (model := row.default_model)}


class _Session:
    """The gateway `%gw use`/`%gw connect` chose (None: follow `current_gateway()`), and whether the
    magics built it (then they also close it when replaced)."""

    gateway: Gateway | None = None
    owned = False
    # `%gw use --model/--decide-model` choices; the families' default models until then
    models: dict[str, str] = _default_models()


def session_gateway() -> Gateway:
    """The magics' gateway: the one `%gw use` chose, else the one the user connected (`gwlab.connect()`,
    called once here when nothing is connected yet)."""
    chosen = _Session.gateway
    if chosen is not None and not chosen.loop.closed:
        return chosen
    gateway = current_gateway()
    assert gateway is not None
    return gateway


def use_gateway(gw: Gateway | None, *, owned: bool = False) -> None:
    """Make `gw` the magics' gateway, or None: follow the connected one (`current_gateway()`).

    The previous one is closed if the magics had opened it."""
    if gw is not None and not isinstance(gw, Gateway):
        raise InvalidRequest("gateway", f"expected a gwlab Gateway (gwlab.connect()); got {type(gw).__name__}")
    previous, was_owned = _Session.gateway, _Session.owned
    _Session.gateway, _Session.owned = gw, owned
    if previous is not None and previous is not gw and was_owned:
        previous.close()


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting the kernel."""

    def error(self, message: str) -> Any:
        usage = " ".join(self.format_usage().split())  # argparse wraps a long usage: one line is asked for
        raise InvalidRequest("%gw", f"{message} ({usage})")


def _parser() -> _Parser:
    parser = _Parser(prog="%gw", add_help=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    chat = sub.add_parser("chat", add_help=False, help="stream an answer to the cell body")
    chat.add_argument("--model")
    chat.add_argument("--protocol", choices=TEXT, default="chat")
    chat.add_argument("--max-tokens", type=int, default=64)
    chat.add_argument("-o", "--output", metavar="NAME")
    chat.add_argument("--gateway", metavar="NAME", help="a Gateway variable, for this cell only")
    decide = sub.add_parser("decide", add_help=False, help="answer the questions in the cell body")
    decide.add_argument("--state", required=True, metavar="EXPR")
    decide.add_argument("--model")
    decide.add_argument("-o", "--output", metavar="NAME")
    decide.add_argument("--gateway", metavar="NAME", help="a Gateway variable, for this cell only")
    use = sub.add_parser("use", add_help=False, help="the magics use this Gateway variable")
    use.add_argument("gateway", nargs="?", metavar="NAME", help="none: the gateway gwlab.connect() returned")
    connect = sub.add_parser("connect", add_help=False, help="replace the session gateway")
    connect.add_argument("gateway", nargs="?", metavar="NAME", help="a Gateway variable")
    connect.add_argument("--url")
    connect.add_argument("--key-env", default=ENV_API_KEY, metavar="VAR")
    connect.add_argument("--local", action="store_true")
    connect.add_argument("--model", help="default model for %%gw chat")
    connect.add_argument("--decide-model", help="default model for %%gw decide")
    for name, what in (("usage", "the request ledger"), ("models", "model IDs visible to the key")):
        sub.add_parser(name, add_help=False, help=what).add_argument("--gateway", metavar="NAME")
    return parser


def parse_questions(text: str) -> Mapping[str, Any]:
    """The cell body as a questions mapping: JSON, or YAML when pyyaml is installed."""
    try:
        data = json.loads(text)
    except ValueError as json_error:
        try:
            import yaml
        except ImportError:  # pragma: no cover  (pyyaml is optional)
            raise InvalidRequest("questions", f"not valid JSON ({json_error}); YAML needs pyyaml "
                                              "(pip install pyyaml), which is not installed") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as yaml_error:
            raise InvalidRequest("questions", f"neither JSON ({json_error}) nor YAML ({yaml_error})") from None
    if not isinstance(data, Mapping):
        raise InvalidRequest("questions", f"the cell must hold a mapping of question IDs; got {type(data).__name__}")
    return data


def _usage_line(family: str, model: str, stream: Any, ending: str, seconds: float) -> str:
    """`[gw] chat · model · 25 in / 8 out tokens · complete · 1.2 s`; any other ending (gwlab/wire/endings.py)
    in capitals with the protocol's own reason: `CAPPED (length)`, `INTERRUPTED`, `STOPPED`."""
    usage, tokens = stream.usage, "usage n/a"
    if usage is not None:
        tokens = f"{getattr(usage, 'input_tokens', None)} in / {getattr(usage, 'output_tokens', None)} out tokens"
    mark = ending
    if ending != "complete":
        reason = _protocol_reason(stream.result) if ending not in ("interrupted", "stopped", "failed") else None
        mark = f"{ending.upper()} ({reason})" if reason else ending.upper()
    return f"[gw] {family} · {model} · {tokens} · {mark} · {seconds:.1f} s"


def _protocol_reason(result: Any) -> str | None:
    """The protocol's word for why the answer stopped: finish_reason, incomplete reason or stop_reason."""
    details = getattr(result, "incomplete_details", None)
    if isinstance(details, Mapping) and details.get("reason"):
        return str(details["reason"])
    reason = getattr(result, "finish_reason", None) or getattr(result, "stop_reason", None)
    return str(reason) if reason else None


class _AnswerView:
    """Where `%%gw chat` streams: in a kernel, one display it updates (at most every `interval` s), so the saved
    notebook holds one output (a print per token saved one output per token, one line each in exported HTML);
    elsewhere (a terminal, a script) plain prints, which stream as they are."""

    def __init__(self, *, in_kernel: bool, interval: float = 0.1) -> None:
        self._in_kernel, self._interval = in_kernel, interval
        self._handle: Any = None
        self._shown, self._last = 0, float("-inf")

    def show(self, text: str) -> None:
        if not self._in_kernel:
            print(text[self._shown:], end="", flush=True)
            self._shown = len(text)
        elif time.monotonic() - self._last >= self._interval:
            self._update(text)

    def end(self, text: str, notes: list[str]) -> None:
        """The whole answer, then the notes (an error, the usage line), each on its own line."""
        if self._in_kernel:
            self._update("\n".join([text, *notes]))
            return
        print(text[self._shown:])
        for note in notes:
            print(note)

    def _update(self, content: str) -> None:
        from IPython.display import Pretty, display

        if self._handle is None:
            self._handle = display(Pretty(content), display_id=True)
        else:
            self._handle.update(Pretty(content))
        self._last = time.monotonic()


@magics_class
class GwMagics(Magics):
    """`%gw` / `%%gw`: chat, decide, usage, models, connect (`%gw?` for the syntax)."""

    @line_cell_magic
    def gw(self, line: str, cell: str | None = None) -> Any:
        try:
            args = _parser().parse_args(_split(line))
            handler = getattr(self, f"_{args.command}")
            return handler(args, cell)
        except GatewayError as exc:  # usage, validation or gateway errors: one line, no traceback
            print(f"[gw] error: {exc}")
            return None

    @property
    def _shell(self) -> InteractiveShell:
        """The shell running the magic (IPython types it optional: a Magics built without one has none)."""
        assert self.shell is not None, "gwlab's magics run in an IPython shell"
        return self.shell

    def _evaluate(self, expression: str, option: str) -> Any:
        """`expression` evaluated in the notebook; its failure (a NameError...) is the user's: one line."""
        try:
            return self._shell.ev(expression)
        except Exception as exc:
            raise InvalidRequest(option, f"{expression!r} could not be evaluated in the notebook: "
                                         f"{type(exc).__name__}: {exc}") from None

    def _gateway(self, args: argparse.Namespace) -> Gateway:
        """This cell's gateway: `--gateway NAME` when given, else the magics' gateway."""
        if getattr(args, "gateway", None) is None:
            return session_gateway()
        gateway = self._evaluate(args.gateway, "--gateway")
        if not isinstance(gateway, Gateway) or gateway.loop.closed:
            raise InvalidRequest("--gateway", f"{args.gateway!r} is not an open gwlab Gateway (gwlab.connect()); "
                                              f"got {type(gateway).__name__}")
        return gateway

    def _chat(self, args: argparse.Namespace, cell: str | None) -> None:
        prompt = (cell or "").strip()
        if not prompt:
            raise InvalidRequest("cell", "%%gw chat streams an answer to the cell body; it is empty")
        gw = self._gateway(args)
        model = args.model or _Session.models["chat"]
        family = getattr(gw, args.protocol)
        started = time.monotonic()
        cap = FAMILIES[args.protocol].token_cap
        stream = family.stream(prompt, model=model, allow_partial=True, **({cap: args.max_tokens} if cap else {}))
        view, status, notes = _AnswerView(in_kernel=getattr(self.shell, "kernel", None) is not None), None, []
        try:
            for _event in stream:
                view.show(stream.text)
        except KeyboardInterrupt:
            stream.close()  # recorded `stopped` in the ledger
            status = "stopped"
        except GatewayError as exc:
            notes.append(f"[gw] error: {exc}")
            status = "failed"
        notes.append(_usage_line(args.protocol, model, stream, status or stream.ending, time.monotonic() - started))
        view.end(stream.text, notes)
        if args.output:
            self._shell.user_ns[args.output] = stream

    def _decide(self, args: argparse.Namespace, cell: str | None) -> Any:
        questions = parse_questions(cell or "")
        state = self._evaluate(args.state, "--state")
        model = args.model or _Session.models["decide"]
        result = self._gateway(args).decide(state, questions, model=model)
        print(f"[gw] decide · {model} · {result.input_tokens} input tokens")
        if args.output:
            self._shell.user_ns[args.output] = result
        return result

    def _usage(self, args: argparse.Namespace, cell: str | None) -> Any:
        return self._gateway(args).usage

    def _models(self, args: argparse.Namespace, cell: str | None) -> Any:
        return self._gateway(args).models.list()

    def _use(self, args: argparse.Namespace, cell: str | None) -> None:
        use_gateway(self._evaluate(args.gateway, "gateway") if args.gateway else None, owned=False)
        print(f"[gw] the magics use {session_gateway()!r}")

    def _connect(self, args: argparse.Namespace, cell: str | None) -> None:
        from gwlab.connection import connect

        if args.gateway:
            use_gateway(self._evaluate(args.gateway, "gateway"), owned=False)
        elif args.url:
            key = os.environ.get(args.key_env)
            if not key:
                raise InvalidRequest("--key-env", f"the environment variable {args.key_env} is not set; "
                                                  "keys are read from the environment, never from a cell")
            use_gateway(connect(args.url, key), owned=True)
        elif args.local:
            use_gateway(connect(env={}), owned=True)  # a client of the process's one embedded gateway
        else:
            use_gateway(None)  # the gateway the user connected, connecting now if there is none
        if args.model:
            _Session.models["chat"] = args.model
        if args.decide_model:
            _Session.models["decide"] = args.decide_model
        print(f"[gw] session gateway: {session_gateway()!r}")


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise InvalidRequest("%gw", f"{exc} in {line!r}") from None


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """`%load_ext gwlab`: registers `%gw` and `%%gw`."""
    ipython.register_magics(GwMagics)
