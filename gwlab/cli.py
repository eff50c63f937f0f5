"""The `gwlab` command: run the local gateway and manage its keys."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gwlab.errors import InvalidRequest

if TYPE_CHECKING:
    from gwlab.local.limits import Limits
    from gwlab.local.settings import Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gwlab", description="gwlab: the local gateway and its keys")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the local gateway in the foreground")
    serve.add_argument("--host", default="127.0.0.1",
                       help="interface to bind; beyond loopback it warns (plain HTTP: keys cross in clear)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="also answer requests whose Host is NAME (repeatable; '*': any, behind a proxy)")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    serve.add_argument("--db", default=None, help="SQLite file (default: $GWLAB_DB or ~/.cache/gwlab)")
    serve.add_argument("--rate-limit-rpm", type=int, default=None, help="per-key requests per minute")
    serve.add_argument("--max-body-bytes", type=int, default=None)
    serve.add_argument("--video-seconds-per-step", type=float, default=None,
                       help="pace of the video preview renderer (10 steps per video)")
    serve.add_argument("--batch-file-max-bytes", type=int, default=None,
                       help="cap of a batch input file upload (default: the providers' 200 MB)")
    serve.add_argument("--batch-window-seconds", type=float, default=None,
                       help="a batch's window instead of the 24 h it asks for (tests: expiry)")
    serve.add_argument("--batch-seconds-per-request", type=float, default=None,
                       help="a pause before each batch line (tests: cancel part-way)")
    serve.add_argument("--batch-expire-after", type=int, default=None,
                       help="expire a batch once this many of its lines ran (tests: expiry part-way)")
    serve.add_argument("--gguf", action="append", default=[], metavar="NAME=PATH",
                       help="serve a GGUF chat model under the id NAME (repeatable; adds to $GWLAB_GGUF)")
    _limit_flags(serve)

    keys = sub.add_parser("keys", help="create, list, disable and delete keys")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", required=True)
    create.add_argument("--models", default=None, help="comma-separated model ids (default: all)")
    for name in ("list", "disable", "delete"):
        action = keys_sub.add_parser(name)
        if name != "list":
            action.add_argument("name")
    for action in keys_sub.choices.values():
        action.add_argument("--db", default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from gwlab.local.settings import Settings

    settings = Settings(db_path=args.db or "")
    if args.command == "serve":
        from gwlab.local.server import serve

        options = {"rate_limit_rpm": args.rate_limit_rpm, "allowed_hosts": tuple(args.allow_host)}
        if args.max_body_bytes:
            options["max_body_bytes"] = args.max_body_bytes
        if args.video_seconds_per_step is not None:
            options["video_seconds_per_step"] = args.video_seconds_per_step
        for name in ("batch_file_max_bytes", "batch_window_seconds", "batch_seconds_per_request",
                     "batch_expire_after"):
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        try:
            options["gguf"] = tuple(_gguf_options(args.gguf).items())
            options["limits"] = _limits(args)
            serve(args.host, args.port, Settings(db_path=args.db or "", **options))
        except InvalidRequest as exc:  # a bad --gguf or GWLAB_GGUF entry: one line naming it, nothing served
            print(f"gwlab: {exc}", file=sys.stderr)
            return 2
        return 0
    return _keys(args, settings)


def _limit_flags(serve: argparse.ArgumentParser) -> None:
    """One flag per field of `Limits` (docs/security.md): a number, or `off` where the limit may be off."""
    from gwlab.local.limits import FLAGS, Limits

    defaults = Limits()
    for name, flag in FLAGS.items():
        default = getattr(defaults, name)
        serve.add_argument(flag, default=None, metavar="N", help=f"default {default if default else 'off'}")


def _limits(args: argparse.Namespace) -> Limits:
    """The `Limits` the flags give; a value that is not a number (or `off`) is an error naming its flag."""
    import dataclasses

    from gwlab.local.limits import FLAGS, Limits

    chosen: dict[str, Any] = {}  # Limits checks each value itself
    for f in dataclasses.fields(Limits):
        text = getattr(args, f.name)
        if text is None:
            continue
        kind = float if f.name.endswith("_s") else int
        try:
            chosen[f.name] = None if text == "off" else kind(text)
        except ValueError:
            raise InvalidRequest(FLAGS[f.name], f"expected a number or 'off', got {text!r}") from None
    try:
        return Limits(**chosen)
    except InvalidRequest as exc:
        raise InvalidRequest(FLAGS[exc.field.removeprefix("limits.")], str(exc).partition(": ")[2]) from None


def _gguf_options(flags: list[str]) -> dict[str, str]:
    """GWLAB_GGUF's models, then each --gguf (a flag wins over the variable for the same NAME)."""
    import os

    from gwlab.local.settings import GGUF_ENV, parse_gguf

    models = parse_gguf(os.environ.get(GGUF_ENV, ""), GGUF_ENV)
    for flag in flags:
        entry = parse_gguf(flag, "--gguf")
        if not entry:
            raise InvalidRequest("--gguf", "expected NAME=PATH")
        models.update(entry)
    return models


def _keys(args: argparse.Namespace, settings: Settings) -> int:
    from gwlab.local.store import Store

    store = Store(settings.resolved_db())
    if args.action == "create":
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        try:
            print(store.create_key(args.name, models))  # the only time the key is shown
        except ValueError as exc:
            print(f"gwlab: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.action == "list":
        print(f"{'NAME':<24} {'PREFIX':<12} {'STATUS':<9} {'CREATED':<20} MODELS")
        for key in store.list_keys():
            created = datetime.fromtimestamp(key.created_at).strftime("%Y-%m-%d %H:%M:%S")
            allowed = ",".join(key.models) if key.models else "all"
            print(f"{key.name:<24} {key.prefix + '…':<12} {key.status:<9} {created:<20} {allowed}")
        return 0
    if args.action == "disable":
        done = store.set_key_status(args.name, "disabled")
    else:
        done = store.delete_key(args.name)
    if not done:
        print(f"gwlab: no key named {args.name!r}", file=sys.stderr)
        return 1
    print(f"{args.action}d key {args.name!r}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
