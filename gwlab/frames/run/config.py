"""A run's options as one frozen object: one set of defaults and one validation pass for every runner.

`df.gw.decide/chat/respond/messages` (rows), `df.gw.videos/images/tasks` (tasks) and the Dask functions
take their options as keyword arguments, typed here (`RunOptions`, `ExtractOptions`, `TaskOptions`, with
`RUN_OPTIONS_DOC` the table every method's docstring shows; `DaskOptions` in `frames/dask/partitions.py`).
Each turns them into a `RunConfig` here, once, before anything is sent: a bad value is refused naming
the option, and a default is written in this module only. The options are passed flat and kept grouped
by concept, as httpx's `_config` keeps its own (`SendLimits`, `Spending`, `Store`, `Failures`, `Output`,
`Polling`): code below the doors reads `config.limits.concurrency`, and each group checks its own.
Where the kinds differ (how many requests in flight, how errors are met) the difference is one table
below. tests/frames/run/test_run_config.py ties the typed options, the docs' table and the groups to
`RunConfig`, so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, TypedDict

from gwlab.errors import InvalidRequest
from gwlab.frames.extract import Structured
from gwlab.frames.grounding.columns import GroundingMode
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.limiter import Limiter
from gwlab.frames.store.checkpoint import AnswerStore

__all__ = ["DEFAULTS", "ERRORS", "EXTRACT_OPTIONS_DOC", "GROUPS", "KINDS", "OPTION_GROUP", "RUN_OPTIONS_DOC",
           "UNGROUPED", "ExtractOptions", "Failures", "Output", "Polling", "RunConfig", "RunOptions", "SendLimits",
           "Spending", "Store", "TaskOptions"]

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


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, slots=True)
class SendLimits:
    """How fast a run sends: requests in flight (None: the kind's default), a token bucket's rates shared by
    every row, or a limiter shared between runs or processes."""

    concurrency: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    limiter: Any = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and not _positive_int(self.concurrency):
            raise InvalidRequest("concurrency", f"must be a positive integer; got {self.concurrency!r}")
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not _positive_number(value):
                raise InvalidRequest(name, f"must be a positive number or None; got {value!r}")


@dataclass(frozen=True, slots=True)
class Spending:
    """What a run may spend and how it is priced: a budget (an int: tokens, or tasks for a task batch; or a
    Budget), prices for the estimate, and a pilot (run only the first rows, estimate the rest)."""

    budget: Any = None
    prices: Any = None
    pilot: int | None = None

    def __post_init__(self) -> None:
        if self.pilot is not None and not _positive_int(self.pilot):
            raise InvalidRequest("pilot", f"must be a positive integer or None; got {self.pilot!r}")


@dataclass(frozen=True, slots=True)
class Store:
    """Where answers already paid for are kept (a path, a postgresql:// URL, an AnswerStore, "auto", or
    None/False: none), and whether to send every row again over them."""

    checkpoint: Any = "auto"
    refresh: bool = False


@dataclass(frozen=True, slots=True)
class Failures:
    """How a failing row is met: raised, or an error row (None: the kind's default); and whether a template
    reading a blank value fails the row or sends it."""

    errors: str | None = None
    blank: str = BLANK_DEFAULT

    def __post_init__(self) -> None:
        if self.errors is not None and self.errors not in ERRORS:
            raise InvalidRequest("errors", f"must be 'raise' or 'coerce'; got {self.errors!r}")
        if self.blank not in BLANKS:
            raise InvalidRequest("blank", f"must be 'fail' or 'send'; got {self.blank!r}")


@dataclass(frozen=True, slots=True)
class Output:
    """What the result looks like: the input columns joined, a prefix on every answer column, a progress bar."""

    join: bool = True
    prefix: str = ""
    progress: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str):
            raise InvalidRequest("prefix", f"must be a string; got {self.prefix!r}")


@dataclass(frozen=True, slots=True)
class Polling:
    """A task batch's own: the folder its files go to, the seconds between polls, and the overall wait."""

    folder: str | Path | None = None
    poll_interval: float = DEFAULT_POLL_INTERVAL
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("poll_interval", "timeout"):
            if not _positive_number(getattr(self, name)):
                raise InvalidRequest(name, f"must be a positive number of seconds; got {getattr(self, name)!r}")


# the options by concept: each group's fields are the keyword options users pass (flat) that it holds
GROUPS: dict[str, type] = {"limits": SendLimits, "spending": Spending, "store": Store, "failures": Failures,
                           "output": Output, "polling": Polling}
OPTION_GROUP: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}
UNGROUPED = ("gateway", "repeats", "batch")  # options that stand alone, RunConfig's own fields


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The options of one run, checked, grouped by concept (each group checks its own). Callers pass them
    flat (`concurrency=8, budget=...`): `of` and `split` map them into the groups, `but` changes them by
    their flat names."""

    kind: Kind = "rows"
    gateway: Any = None
    limits: SendLimits = SendLimits()
    spending: Spending = Spending()
    store: Store = Store()
    failures: Failures = Failures()
    output: Output = Output()
    polling: Polling = Polling()
    repeats: int = 1  # ask each request this many times (resampling)
    batch: Any = None  # True, a dict or a gwlab.BatchOptions: send as provider batch jobs

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidRequest("kind", f"one of {', '.join(KINDS)}; got {self.kind!r}")
        for name, default in DEFAULTS[self.kind].items():
            group = OPTION_GROUP[name]
            if getattr(getattr(self, group), name) is None:
                object.__setattr__(self, group, replace(getattr(self, group), **{name: default}))
        if not _positive_int(self.repeats):
            raise InvalidRequest("repeats", f"must be a positive integer; got {self.repeats!r}")

    @classmethod
    def of(cls, kind: Kind, options: Mapping[str, Any]) -> RunConfig:
        """The config of keyword `options` for a run of `kind`; an option the kind does not take is a
        TypeError naming it, as Python's own for an unexpected keyword."""
        unknown = sorted(set(options) - cls.options(kind))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        return cls(kind=kind).but(**options)

    @classmethod
    def split(cls, kind: Kind, options: Mapping[str, Any], own: Iterable[str]) -> tuple[dict[str, Any], RunConfig]:
        """A method's own keywords (`own`: extract's `max_reasks`, ...) apart from the run's, and the
        config of the run's: what a face does at its door when it takes both in one `**options`."""
        names = set(own)
        mine = {name: value for name, value in options.items() if name in names}
        return mine, cls.of(kind, {name: value for name, value in options.items() if name not in names})

    @classmethod
    def options(cls, kind: Kind) -> frozenset[str]:
        """The keyword options a run of `kind` takes: every group's fields and the ungrouped ones, but the
        other kinds' own."""
        others = {option for option, kinds in _ONLY.items() if kind not in kinds}
        return frozenset({*OPTION_GROUP, *UNGROUPED} - others)

    def but(self, **changes: Any) -> RunConfig:
        """A copy with `changes`, named as the keyword options are (`join=False, budget=None`), or a whole
        group or field (`output=Output(...)`, `kind="rows"`); checked again. An unknown name: TypeError."""
        direct = {name: value for name, value in changes.items() if name not in OPTION_GROUP}
        nested: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            if name in OPTION_GROUP:
                nested.setdefault(OPTION_GROUP[name], {})[name] = value
        for group, values in nested.items():
            direct[group] = replace(direct.get(group, getattr(self, group)), **values)
        return replace(self, **direct)


# --- the options as callers type them (keyword arguments) ------------------------------------------------


class RunOptions(TypedDict, total=False):
    """Options every `df.gw` method takes (documented in `RUN_OPTIONS_DOC`)."""

    gateway: Any
    concurrency: int
    requests_per_minute: float | None
    tokens_per_minute: float | None
    limiter: Limiter | None
    budget: int | Budget | None
    prices: Any
    pilot: int | None
    checkpoint: str | Path | AnswerStore | Literal[False] | None
    refresh: bool
    repeats: int
    blank: Literal["fail", "send"]
    errors: Literal["raise", "coerce"]
    progress: bool
    join: bool
    prefix: str
    batch: Any


class ExtractOptions(RunOptions, total=False):
    """`df.gw.extract`'s options: the run's, and how answers are asked for (documented in `extract`)."""

    max_reasks: int
    structured: Structured
    grounding: GroundingMode
    source: str | None


class TaskOptions(TypedDict, total=False):
    """Options every task batch (`df.gw.videos`, `images`, `tasks`) takes (documented in `tasks`)."""

    folder: str | Path | None
    gateway: Any
    concurrency: int
    requests_per_minute: float | None
    limiter: Limiter | None
    budget: int | Budget | None
    prices: Mapping[str, float] | None
    pilot: int | None
    checkpoint: str | Path | AnswerStore | Literal[False] | None
    refresh: bool
    blank: Literal["fail", "send"]
    poll_interval: float
    timeout: float
    errors: Literal["raise", "coerce"]
    progress: bool
    join: bool
    prefix: str


EXTRACT_OPTIONS_DOC = """
        max_reasks : int, default 1
            How many times an invalid answer (not JSON, a missing field, a wrong type, an extra field,
            an unknown category) is asked again, with the validation error shown to the model. Each
            re-ask is a request: its tokens are added to the row's usage, budget and checkpoint.
        structured : {"auto", "native", "prompt"}, default "auto"
            "native" asks in the family's structured-output form; "prompt" puts the schema in the
            prompt and parses the text; "auto" asks natively until the gateway answers a 400 naming
            that form's field, then resends in the prompt, says so once (a warning and ``.run``) and
            remembers it for that gateway for the life of the process.
        grounding : {"flag", "drop", "off"}, optional
            Default: "flag" when `prompt` reads one column or `source` is given, else "off".
            Align each extracted string, number and date with the row's source text (exact, fuzzy,
            not_found, or misplaced: written only as another kind of text than the field's, an id "18"
            from "18 euros"; and its span; see docs/pandas.md, "Grounding"). "flag" keeps an ungrounded
            value and says so in ``{field}__grounding`` and ``__notes``; "drop" makes it missing (its
            reason in ``__notes``, the value still in ``__raw``); "off" aligns nothing. Booleans,
            categories, lists and fields whose schema says ``"x-grounding": false`` are exempt;
            ``"x-grounding": "<kind>"`` sets a field's kind. Ungrounded does not prove a value wrong: a
            right value may be paraphrased. Columns per grounded field: ``{field}__grounding`` (category:
            exact, fuzzy, not_found, misplaced; NA for a missing value) and ``{field}__span``
            (``(start, end)`` into the source text, or None).
        source : str, optional
            The column whose text values are grounded in (default: the one column `prompt` reads).
"""  # `df.gw.extract`'s own options, shown in its docstring


RUN_OPTIONS_DOC = """
    gateway : Gateway or AsyncGateway, optional
        Where to send; default: the process's default gateway (``gwlab.connect()``).
    concurrency : int, default 16
        Requests in flight at once, shared by all rows.
    requests_per_minute, tokens_per_minute : float, optional
        A token-bucket limit shared by every row of the run; a 429 pauses all rows for its
        Retry-After.
    limiter : Limiter, optional
        A limiter to share between runs or processes (``SharedTokenBucket``).
    budget : int or Budget, optional
        Billed tokens (decisions: input only), or ``Budget(cost=dollars, prices=...)``. Checked
        before each send against a conservative estimate; the run stops before exceeding it and the
        rows left are reported ``not_run``.
    prices : dict or PriceTable, optional
        Dollars per million tokens per model, for the cost estimate (default: local models free).
    pilot : int, optional
        Run only the first `pilot` rows; the summary estimates what the rest would cost.
    checkpoint : path, URL, Checkpoint, "auto" or None, default "auto"
        Answers already paid for: a re-run, or a run resumed after a crash, sends only the missing
        rows. A path is a SQLite file; a ``postgresql://`` URL a PostgreSQL database that processes
        on several hosts share. "auto" uses ``$GWLAB_CHECKPOINT`` or ``~/.cache/gwlab/frames.sqlite``;
        None or False keeps nothing. The run's record (``gwlab.runs``) is appended there too; with
        None or False it is kept for this process only (``gwlab.runs(False)``).
    refresh : bool, default False
        Send every row again (and overwrite the checkpoint).
    repeats : int, default 1
        Ask each request `repeats` times; numeric answers are averaged and their spread reported
        in ``{column}__std`` columns, with ``__repeats`` counting the asks that succeeded, and
        ``{q}__agreement`` (``text__agreement`` for text) the share of a row's repeats that gave its
        most common answer. Every repeat's own answer: ``result.repeats_frame()``, one row per (row,
        repeat); ``gwlab.stability(result)`` per question (see gwlab/frames/evaluation/repeats.py).
    blank : {"fail", "send"}, default "fail"
        A row whose template reads an empty or whitespace-only value fails, as one reading NaN does
        (a model asked about nothing invents an answer); "send" sends such rows. A text that is
        blank as a whole is never sent.
    errors : {"raise", "coerce"}, default "raise"
        "coerce" turns a failed row into an error row (NaN answers, the reason in ``__error``);
        never a default answer.
    progress : bool, default True
        A tqdm bar advanced per finished row.
    join : bool, default True
        Return the input columns followed by the answer columns; False: the answer columns only.
    prefix : str, default ""
        Prepended to every answer column (to run twice into one frame).
    batch : bool, dict or BatchOptions, optional
        Text runs (chat, respond, messages, extract): send the unanswered rows as provider batch
        jobs (OpenAI batches; Anthropic message batches for messages) at the batch price, and return
        the same columns once they end. ``BatchOptions(wait=False)`` submits and returns; the same
        call run again, from any kernel on the same checkpoint, collects. See docs/guide/batches.md.

    Returns
    -------
    BatchFrame
        A new DataFrame on the input's index (MultiIndex and duplicate labels kept) whose repr
        shows the run summary (``.run``). Meta columns per row: ``__input_tokens``,
        ``__output_tokens``, ``__request_id``, ``__error`` and ``__status`` (sent, duplicate,
        cached, error or not_run).
"""
