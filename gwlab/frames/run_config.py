"""A run's options as one frozen object: one set of defaults and one validation pass for every runner.

`df.gw.decide/chat/respond/messages` (rows), `df.gw.videos/images/tasks` (tasks) and the Dask functions
take their options as keyword arguments (`RunOptions`, `TaskOptions` in the accessor, `DaskOptions` in
`frames.dask`, which document them). Each turns them into a `RunConfig` here, once, before anything is
sent: a bad value is refused naming the option, and a default is written in this module only. Where the
kinds differ (how many requests in flight, how errors are met) the difference is one table below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from gwlab.errors import InvalidRequest

__all__ = ["DEFAULTS", "ERRORS", "KINDS", "RunConfig"]

Kind = Literal["rows", "tasks", "dask"]
KINDS: tuple[Kind, ...] = ("rows", "tasks", "dask")
ERRORS = ("raise", "coerce")
# per kind: requests in flight, and how a failed row is met. Tasks: a submission holds a render slot on
# the gateway for its whole life. Dask: per partition, and "coerce" because one raising partition would
# fail the whole computation.
DEFAULTS: dict[Kind, dict[str, Any]] = {"rows": {"concurrency": 16, "errors": "raise"},
                                        "tasks": {"concurrency": 4, "errors": "raise"},
                                        "dask": {"concurrency": 8, "errors": "coerce"}}
DEFAULT_POLL_INTERVAL = 1.0  # seconds between polls of a task batch's open tasks
DEFAULT_TIMEOUT = 600.0  # seconds a task batch waits overall
BLANKS = ("fail", "send")  # a template that reads a blank value: the row fails (as NaN), or is sent
BLANK_DEFAULT = BLANKS[0]
# the options only one kind takes (every other field is shared)
_ONLY: dict[str, tuple[Kind, ...]] = {"tokens_per_minute": ("rows", "dask"), "repeats": ("rows",),
                                      "folder": ("tasks",), "poll_interval": ("tasks",), "timeout": ("tasks",),
                                      "batch": ("rows",)}


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The options of one run, checked. `None` for concurrency/errors means the kind's default."""

    kind: Kind = "rows"
    gateway: Any = None
    concurrency: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    limiter: Any = None
    budget: Any = None  # an int (tokens, or tasks for a task batch) or a Budget
    prices: Any = None
    pilot: int | None = None
    checkpoint: Any = "auto"  # a path, a postgresql:// URL, an AnswerStore, "auto", or None/False (none)
    refresh: bool = False
    repeats: int = 1
    errors: str | None = None
    progress: bool = True
    join: bool = True
    prefix: str = ""
    blank: str = BLANK_DEFAULT
    folder: str | Path | None = None
    poll_interval: float = DEFAULT_POLL_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    batch: Any = None  # True, a dict or a frames.batch.BatchOptions: send as provider batch jobs

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidRequest("kind", f"one of {', '.join(KINDS)}; got {self.kind!r}")
        for name, default in DEFAULTS[self.kind].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        self._check()

    @classmethod
    def of(cls, kind: Kind, options: Mapping[str, Any]) -> RunConfig:
        """The config of keyword `options` for a run of `kind`; an option the kind does not take is a
        TypeError naming it, as Python's own for an unexpected keyword."""
        allowed = {f.name for f in fields(cls)} - {"kind"} - {o for o, kinds in _ONLY.items() if kind not in kinds}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        return cls(kind=kind, **options)

    def but(self, **changes: Any) -> RunConfig:
        """A copy with `changes` (checked again)."""
        return replace(self, **changes)

    def _check(self) -> None:
        if self.errors not in ERRORS:
            raise InvalidRequest("errors", f"must be 'raise' or 'coerce'; got {self.errors!r}")
        for name in ("concurrency", "repeats"):
            if not _positive_int(getattr(self, name)):
                raise InvalidRequest(name, f"must be a positive integer; got {getattr(self, name)!r}")
        if self.pilot is not None and not _positive_int(self.pilot):
            raise InvalidRequest("pilot", f"must be a positive integer or None; got {self.pilot!r}")
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not _positive_number(value):
                raise InvalidRequest(name, f"must be a positive number or None; got {value!r}")
        for name in ("poll_interval", "timeout"):
            if not _positive_number(getattr(self, name)):
                raise InvalidRequest(name, f"must be a positive number of seconds; got {getattr(self, name)!r}")
        if self.blank not in BLANKS:
            raise InvalidRequest("blank", f"must be 'fail' or 'send'; got {self.blank!r}")
        if not isinstance(self.prefix, str):
            raise InvalidRequest("prefix", f"must be a string; got {self.prefix!r}")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
