"""`df.gw`: gateway calls over the rows of a DataFrame. Returns a new frame; never edits this one.

Each method follows the pandas accessor recipe: extract (render the row templates), call (the batch
runner), wrap (answers as columns on the caller's index, positionally, so MultiIndex and duplicate
labels keep their rows). The accessor holds the frame and nothing else.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import _client, batch_run, operators, recipes, records, repeats
from gwlab.frames.budget import BYTES_PER_TOKEN, OverLimit, over_limit
from gwlab.frames.cascade import Cascade
from gwlab.frames.cascade_run import run_cascade
from gwlab.frames.checkpoint import AnswerStore, open_for_run
from gwlab.frames.extract import DEFAULT_MAX_REASKS, Structured, extract_recipe, typed_columns
from gwlab.frames.grounding import GroundingMode, GroundingPlan
from gwlab.frames.limiter import Limiter
from gwlab.frames.operators import OperatorFrame
from gwlab.frames.recipes import META_COLUMNS, RowRecipe
from gwlab.frames.result import BatchFrame
from gwlab.frames.run_config import BLANK_DEFAULT, RunConfig
from gwlab.frames.runner import Batch, Budget, Runner
from gwlab.frames.task_batch import COLUMNS as TASK_COLUMNS
from gwlab.frames.task_batch import TaskFrame, TaskRun
from gwlab.frames.templates import Rows, Template, json_value
from gwlab.wire import images, videos
from gwlab.wire.models import DEFAULT_MODELS  # written once, in wire
from gwlab.wire.schema import Schema
from gwlab.wire.tasks import TaskFamily, build_submit

__all__ = ["ExtractOptions", "GatewayAccessor", "InputLimitWarning", "RepeatsWarning", "RunOptions", "TaskOptions"]


TemplateSpec = str | Sequence[str] | Mapping[str, str]


class RunOptions(TypedDict, total=False):
    """Options every `df.gw` method takes (documented in `_RUN_OPTIONS_DOC`)."""

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


_RUN_OPTIONS_DOC = """
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
        repeat); ``gwlab.stability(result)`` per question (see gwlab/frames/repeats.py).
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


def _blank_rule(options: Mapping[str, Any]) -> dict[str, Any]:
    """The `blank=` run option as `Template.rows` takes it (default: a blank value fails its row)."""
    return {"blank": options.get("blank", BLANK_DEFAULT)}


def _documented(method: Any) -> Any:
    """Fill the shared runner options into a method's numpydoc (Jupyter's `?` shows them)."""
    lines = _RUN_OPTIONS_DOC.strip("\n").split("\n")
    options = "\n".join(("    " + line if line.strip() else "") for line in lines)
    method.__doc__ = method.__doc__.replace("        {run_options}\n", options + "\n")
    return method


@pd.api.extensions.register_dataframe_accessor("gw")
class GatewayAccessor:
    """Gateway calls over the rows of a DataFrame. Returns a new frame; never edits this one."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame  # the only state: no caches, no settings

    # --- decisions ------------------------------------------------------------------------------

    @_documented
    def decide(self, state: TemplateSpec, questions: Mapping[str, Any], *, model: str | None = None,
               cascade: Cascade | None = None, **options: Unpack[RunOptions]) -> BatchFrame:
        """One decision request per row, every question packed in; answers as new columns.

        Parameters
        ----------
        state : str, list of str or dict
            A template over columns (``"{ticket}"``, ``"{subject}: {body}"``; ``{{`` and ``}}`` are
            literal braces), a bare column name, or a list/dict of columns sent as a JSON object state
            (dict: ``{"key in the state": "column"}``). An unknown column raises InvalidRequest naming it;
            a row whose text is empty or whose column is missing fails as a row.
        questions : dict
            ``{question id: {"type": "noul"|"choice"|"score", "instructions": ..., "criteria": ...}}``,
            validated once before any row is sent.
        model : str, optional
            Decision model ID (default ``local/decide-e5-small``).
        cascade : gwlab.Cascade, optional
            This model answers the rows it is confident of and an oracle (a decision model or a Series
            of labels) the rest, at a stated accuracy, precision or recall with probability >= 1 - delta
            (docs/guide/cascades.md). Adds ``{q}__answer``, ``{q}__source`` (proxy or oracle) and
            ``{q}__proxy_score``; ``.run.cascade`` counts the oracle calls and gives the threshold and bound.
        {run_options}
        Columns: ``{q}__noul``; ``{q}__choice``, or ``{q}__score`` (expected level) and ``{q}__level``
        (most likely level, what accuracy scores); ``{q}__p__{option}`` per option or level,
        ``{q}__confidence``.

        Examples
        --------
        >>> urgent = {"urgent": {"type": "noul", "instructions": "Is this urgent?"}}
        >>> out = tickets.gw.decide("{text}", urgent)  # doctest: +SKIP
        >>> out[["urgent__noul", "__status"]]          # doctest: +SKIP
        """
        coroutine = self.adecide(state, questions, model=model, cascade=cascade, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def adecide(self, state: TemplateSpec, questions: Mapping[str, Any], *, model: str | None = None,
                      cascade: Cascade | None = None, **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `decide`: await it in a running loop (with an AsyncGateway)."""
        if cascade is not None:
            return await run_cascade(self._frame, state, questions, model, cascade, options)
        family = recipes.decisions_recipe_for(questions, model)
        rows = Template.parse(state, self._frame.columns, field="state").rows(self._frame, **_blank_rule(options))
        return await self._run(family, rows, options, {"state": state})

    # --- text protocols -------------------------------------------------------------------------

    @_documented
    def chat(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
             max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
             **options: Unpack[RunOptions]) -> BatchFrame:
        """One chat completion per row; columns ``text``, ``finish``, ``ending``, ``tool_calls``.

        Parameters
        ----------
        prompt : str
            A template over columns (``"Summarise: {text}"``) or a bare column name: the user message.
        system : str, optional
            A system message: constant text, or a template over columns.
        model : str, optional
            Chat model ID (default ``local/smollm2-135m-instruct``, ``DEFAULT_MODELS["text"]``).
        max_tokens : int, optional
            ``max_completion_tokens`` of each request; required with a budget.
        params : dict, optional
            Further request fields (``temperature``, ``tools``, ``response_format``...).
        {run_options}
        Examples
        --------
        >>> df.gw.chat("Q: What colour is {fruit}?\\nA:", max_tokens=8)  # doctest: +SKIP
        """
        coroutine = self.achat(prompt, system=system, model=model, max_tokens=max_tokens, params=params,
                               **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def achat(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
                    max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
                    **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `chat`: await it in a running loop (with an AsyncGateway)."""
        recipe = recipes.text_recipe("chat", model, max_tokens, params)
        return await self._run(recipe, self._prompts(prompt, system, options=options), options,
                               {"prompt": prompt, "system": system})

    @_documented
    def respond(self, prompt: TemplateSpec, *, instructions: str | None = None, model: str | None = None,
                max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
                **options: Unpack[RunOptions]) -> BatchFrame:
        """One responses-protocol call per row; columns ``text``, ``status``, ``ending``, ``tool_calls``.

        Parameters
        ----------
        prompt : str
            A template over columns or a bare column name: the ``input`` text.
        instructions : str, optional
            Constant text or a template; sent on every request (never inherited).
        model : str, optional
            Model ID (default ``local/smollm2-135m-instruct``, ``DEFAULT_MODELS["text"]``).
        max_tokens : int, optional
            ``max_output_tokens`` of each request; required with a budget.
        params : dict, optional
            Further request fields (``temperature``, ``tools``, ``text``...).
        {run_options}
        """
        coroutine = self.arespond(prompt, instructions=instructions, model=model, max_tokens=max_tokens,
                                  params=params, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def arespond(self, prompt: TemplateSpec, *, instructions: str | None = None,
                       model: str | None = None, max_tokens: int | None = None,
                       params: Mapping[str, Any] | None = None,
                       **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `respond`: await it in a running loop (with an AsyncGateway)."""
        recipe = recipes.text_recipe("responses", model, max_tokens, params)
        return await self._run(recipe, self._prompts(prompt, instructions, "instructions", options), options,
                               {"prompt": prompt, "instructions": instructions})

    @_documented
    def messages(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
                 max_tokens: int = 256, params: Mapping[str, Any] | None = None,
                 **options: Unpack[RunOptions]) -> BatchFrame:
        """One messages-protocol call per row; columns ``text``, ``finish``, ``ending``, ``tool_calls``.

        Parameters
        ----------
        prompt : str
            A template over columns or a bare column name: the user message.
        system : str, optional
            Constant text or a template: the protocol's top-level ``system``.
        model : str, optional
            Model ID (default ``local/smollm2-135m-instruct``, ``DEFAULT_MODELS["text"]``).
        max_tokens : int, default 256
            Required by the protocol; also what a budget holds back per request.
        params : dict, optional
            Further request fields (``temperature``, ``tools``, ``stop_sequences``...).
        {run_options}
        """
        coroutine = self.amessages(prompt, system=system, model=model, max_tokens=max_tokens, params=params,
                                   **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def amessages(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
                        max_tokens: int = 256, params: Mapping[str, Any] | None = None,
                        **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `messages`: await it in a running loop (with an AsyncGateway)."""
        recipe = recipes.text_recipe("messages", model, max_tokens, params)
        return await self._run(recipe, self._prompts(prompt, system, options=options), options,
                               {"prompt": prompt, "system": system})

    # --- typed answers ------------------------------------------------------------------------------

    @_documented
    def extract(self, prompt: TemplateSpec, schema: Any, *, protocol: str = "chat", system: str | None = None,
                model: str | None = None, max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
                **options: Unpack[ExtractOptions]) -> BatchFrame:
        """Fields per row, as typed columns: one structured-output request per row, validated.

        Parameters
        ----------
        prompt : str
            A template over columns or a bare column name: what to extract from (``"Ticket: {text}"``).
        schema : Pydantic model, JSON Schema or dict
            The fields: a Pydantic model class, an object's JSON Schema, or ``{column: type}`` with
            ``str``, ``int``, ``float``, ``bool``, a list of allowed values, ``datetime.date``,
            ``datetime.datetime``, ``T | None`` (optional: the model may answer null, and the prompt
            tells it to when the text does not state the field) and ``list[T]``.
            Normalised to one strict schema (every field required, optional ones nullable).
        protocol : {"chat", "responses", "messages"}, default "chat"
            The family: chat sends ``response_format`` (json_schema, strict), responses ``text.format``,
            messages a forced tool whose ``input_schema`` is the schema.
        system : str, optional
            Constant text or a template (responses: its ``instructions``).
        model : str, optional
            Model ID (default: the family's, ``DEFAULT_MODELS["text"]``).
        max_tokens : int, optional
            The family's token cap per request (required by messages and with a budget).
        params : dict, optional
            Further request fields; the structured-output field itself is set by `schema`.
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
            Align each extracted string, number and date with the row's source text (exact, fuzzy or
            not_found, and its span; see docs/pandas.md, "Grounding"). "flag" keeps a value not found and
            says so in ``{field}__grounding`` and ``__notes``; "drop" makes it missing (its reason in
            ``__notes``, the value still in ``__raw``); "off" aligns nothing. Booleans, categories, lists
            and fields whose schema says ``"x-grounding": false`` are exempt. Not found does not prove a
            value wrong: a right value may be paraphrased.
        source : str, optional
            The column whose text values are grounded in (default: the one column `prompt` reads).
        {run_options}
        Columns: one per top-level field, named as the field, in pandas' nullable dtypes (``Int64``,
        ``Float64``, ``boolean``, ``string``, ``category`` with the allowed values as categories,
        ``datetime64[ns]``; lists and nested objects one ``object`` column of lists/dicts), then
        ``__raw`` (the answer as written) and ``__reasks``. A row still invalid after its re-asks has
        status ``error``, its fields missing and the validation error in ``__error``. With grounding,
        per grounded field ``{field}__grounding`` (category: exact, fuzzy, not_found; NA for a missing
        value) and ``{field}__span`` (``(start, end)`` into the source text, or None), then ``__notes``.

        Examples
        --------
        >>> tickets.gw.extract("{text}", {"product": str, "order": int | None}, max_tokens=64)  # doctest: +SKIP
        """
        coroutine = self.aextract(prompt, schema, protocol=protocol, system=system, model=model,
                                  max_tokens=max_tokens, params=params, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def aextract(self, prompt: TemplateSpec, schema: Any, *, protocol: str = "chat",
                       system: str | None = None, model: str | None = None, max_tokens: int | None = None,
                       params: Mapping[str, Any] | None = None,
                       **options: Unpack[ExtractOptions]) -> BatchFrame:
        """The async twin of `extract`: await it in a running loop (with an AsyncGateway)."""
        max_reasks = options.pop("max_reasks", DEFAULT_MAX_REASKS)  # the rest are the run's options
        structured: Structured = options.pop("structured", "auto")
        grounding: GroundingMode | None = options.pop("grounding", None)
        source = options.pop("source", None)
        parsed = Schema.of(schema)
        read = Template.parse(prompt, self._frame.columns, field="prompt").columns
        plan = GroundingPlan.of(grounding, source, parsed, read, self._frame.columns)
        origin = _client.connection(options.get("gateway")).origin
        recipe, mode = extract_recipe(protocol, parsed, model, max_tokens, params, max_reasks=max_reasks,
                                      structured=structured, gateway=origin)
        template = {"prompt": prompt, "system": system, "schema": parsed.json}
        if plan is not None:
            template["grounding"] = {"mode": plan.mode, "source": plan.source}
        texts = None if plan is None else self._frame[_column_named(self._frame, plan.source)].tolist()

        def convert(answers: pd.DataFrame) -> pd.DataFrame:
            answers = typed_columns(answers, parsed)
            return answers if plan is None else plan.apply(answers, texts)

        out = await self._run(recipe, self._prompts(prompt, system), options, template, convert=convert,
                              derived=None if plan is None else plan)
        out.run.structured = out.attrs["gwlab_run"]["structured"] = mode.note(origin)
        if plan is not None:
            out.attrs["gwlab_run"]["grounding"] = template["grounding"]
        return out

    # --- asynchronous tasks: one task per row -------------------------------------------------------

    def videos(self, prompt: TemplateSpec, *, model: str | None = None, seconds: str | int | None = None,
               size: str | None = None, params: Mapping[str, Any] | None = None,
               **options: Unpack[TaskOptions]) -> TaskFrame:
        """One video task per row (`gw.videos`), waited for and downloaded; see `tasks` for the options.

        Parameters
        ----------
        prompt : str
            A template over columns (``"{scene}, at dusk"``) or a bare column name.
        model : str, optional
            Video model ID (default ``local/video-preview``, ``DEFAULT_MODELS["videos"]``).
        seconds, size : optional
            Clip length (4, 8 or 12) and size (``"1280x720"``...), checked before anything is sent.
        params : dict, optional
            Further submission fields.

        Returns
        -------
        TaskFrame
            Columns ``task_id``, ``status``, ``error``, ``file`` (the MP4), ``thumbnail`` (a PNG),
            ``submitted_at``, ``finished_at``, ``seconds`` on the input's index.
        """
        coroutine = self.avideos(prompt, model=model, seconds=seconds, size=size, params=params, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def avideos(self, prompt: TemplateSpec, *, model: str | None = None, seconds: str | int | None = None,
                      size: str | None = None, params: Mapping[str, Any] | None = None,
                      **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `videos`: await it in a running loop (with an AsyncGateway)."""
        model = model or DEFAULT_MODELS["videos"]

        def build(text: str) -> dict[str, Any]:
            return videos.build_create(text, model, seconds, size, **dict(params or {}))

        return await self._run_tasks(videos.VIDEOS, model, prompt, build, options)

    def images(self, prompt: TemplateSpec, *, model: str | None = None, size: str | None = None,
               params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """One image task per row (`gw.images`), waited for and downloaded; see `tasks` for the options.

        Parameters
        ----------
        prompt : str
            A template over columns (``"a poster of {title}"``) or a bare column name.
        model : str, optional
            Image model ID (default ``local/image-preview``, ``DEFAULT_MODELS["images"]``).
        size : str, optional
            ``"512x512"``, ``"1024x1024"``..., checked before anything is sent.
        params : dict, optional
            Further submission fields.

        Returns
        -------
        TaskFrame
            Columns ``task_id``, ``status``, ``error``, ``file`` (the PNG), ``thumbnail``,
            ``submitted_at``, ``finished_at``, ``seconds``; its notebook repr draws the thumbnails.

        Examples
        --------
        >>> posters = films.gw.images("a poster of {title}", folder="posters")  # doctest: +SKIP
        """
        coroutine = self.aimages(prompt, model=model, size=size, params=params, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def aimages(self, prompt: TemplateSpec, *, model: str | None = None, size: str | None = None,
                      params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `images`: await it in a running loop (with an AsyncGateway)."""
        model = model or DEFAULT_MODELS["images"]

        def build(text: str) -> dict[str, Any]:
            return images.build_create(text, model, size, **dict(params or {}))

        return await self._run_tasks(images.IMAGES, model, prompt, build, options)

    def tasks(self, family: TaskFamily, prompt: TemplateSpec, *, model: str,
              params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """One task per row on any task API described by `family`; waited for, downloaded, paid for once.

        Every row with no task yet is submitted (under `concurrency`, the rate limit and the budget);
        every open task is polled every `poll_interval` seconds until it is terminal or `timeout`
        passes; each completed result is downloaded into `folder`. The task id is written to the
        checkpoint the moment a submission is answered: re-running the cell, or resuming after the
        kernel died, polls the tasks already submitted and submits only rows that have none, and a
        submission whose answer was lost is looked up before anything is resent.

        Parameters
        ----------
        family : TaskFamily
            The task API's description (``gwlab.wire.videos.VIDEOS``, ``gwlab.wire.images.IMAGES``, or
            your own ``gwlab.TaskFamily``).
        prompt : str
            A template over columns or a bare column name, put at the family's prompt field.
        model : str
            Model ID, put at the family's model field.
        params : dict, optional
            Further submission fields (dotted names nest: ``{"parameters.size": "1024*1024"}``).
        folder : str or Path, optional
            Where results are written, as ``{task_id}.{ext}`` (default ``gwlab-tasks/{family}``).
        gateway : Gateway or AsyncGateway, optional
            Where to send; default: the process's default gateway (``gwlab.connect()``).
        concurrency : int, default 4
            Submissions and polls in flight at once.
        requests_per_minute : float, optional
            A limit on submissions (or pass a shared `limiter`); a 429 pauses every submission.
        budget : int or Budget, optional
            New tasks this run may create, or ``Budget(cost=dollars)`` with `prices`; checked before
            anything is sent: rows beyond it are ``not_run``.
        prices : dict, optional
            Dollars per task per model (globs allowed); local preview models cost 0.
        pilot : int, optional
            Submit only rows among the first `pilot`; the summary estimates the cost and time of the rest.
        checkpoint : path, URL, Checkpoint, "auto" or None, default "auto"
            Where task ids and the run's record are kept (as for ``decide``: a SQLite path or a
            ``postgresql://`` URL); None keeps nothing and cannot resume.
        refresh : bool, default False
            Submit every row again, ignoring the tasks in the checkpoint (they are paid for again).
        blank : {"fail", "send"}, default "fail"
            As for ``decide``: a row whose prompt reads an empty value fails unless "send".
        poll_interval : float, default 1.0
            Seconds between polls of the open tasks.
        timeout : float, default 600
            Seconds the run waits overall; tasks still open are reported with their status and
            polled again by a re-run.
        errors : {"raise", "coerce"}, default "raise"
            "coerce" keeps a failed submission as an error row; a task that failed is a row either way.
        progress : bool, default True
            A bar over rows counting submitted, running and finished tasks.
        join : bool, default True
            As for ``decide``: the input columns first, then the task columns.
        prefix : str, default ""
            Prepended to every task column.

        Returns
        -------
        TaskFrame
            ``task_id``, ``status`` (the task's, or ``error``, ``in_doubt``, ``not_run``), ``error``,
            ``file``, ``thumbnail``, ``submitted_at``, ``finished_at`` (UTC), ``seconds``; ``.run``
            says what the run did.
        """
        coroutine = self.atasks(family, prompt, model=model, params=params, **options)
        return _client.run_sync(coroutine, options.get("gateway"))

    async def atasks(self, family: TaskFamily, prompt: TemplateSpec, *, model: str,
                     params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `tasks`: await it in a running loop (with an AsyncGateway)."""
        if not isinstance(family, TaskFamily):
            raise InvalidRequest("family", f"a gwlab.wire.tasks.TaskFamily; got {type(family).__name__}")

        def build(text: str) -> dict[str, Any]:
            return build_submit(family, text, model, params)

        return await self._run_tasks(family, model, prompt, build, options)

    async def _run_tasks(self, family: TaskFamily, model: str, prompt: TemplateSpec,
                         build: Callable[[str], dict[str, Any]], options: TaskOptions) -> TaskFrame:
        config = RunConfig.of("tasks", options)
        rows = Template.parse(prompt, self._frame.columns, field="prompt").rows(self._frame, blank=config.blank)
        bodies: list[dict[str, Any] | None] = []
        errors = dict(rows.errors)
        for position, code in enumerate(rows.codes):
            if code < 0:
                bodies.append(None)
                continue
            try:
                bodies.append(build(rows.value(int(code))))
            except InvalidRequest as exc:
                if exc.field != "prompt":
                    raise  # a setting shared by every row: refused before anything is sent
                bodies.append(None)
                errors[position] = str(exc)
        if errors and config.errors == "raise":
            position, message = min(errors.items())
            raise InvalidRequest("prompt", f"row {self._labels([position])[0]!r}: {message} (errors='coerce' "
                                           "makes it an error row)")
        prefix = config.prefix
        if config.join:
            clash = [f"{prefix}{c}" for c in TASK_COLUMNS if f"{prefix}{c}" in self._frame.columns]
            if clash:
                raise InvalidRequest("prefix", f"the frame already has column {clash[0]!r}; pass prefix='...' "
                                               "or join=False")
        client, origin = _client.task_client(config.gateway, family)
        checkpoint, owned = open_for_run(config.checkpoint)
        try:
            run = TaskRun(client, family, model, self._frame.index, bodies, errors, config, origin=origin,
                          checkpoint=checkpoint)
            _client.stop_on_interrupt(run)
            with _client.run_tag(None, family.name) as run_label:
                frame, summary = await run.run()
            described = records.Described({"prompt": prompt}, self._frame.index, prefix, run_label)
            records.record_tasks(checkpoint, run, frame, summary, described)
        finally:
            if owned and checkpoint is not None:
                checkpoint.close()
        if run.failure is not None:
            raise run.failure
        answers = self._wrap(frame, config)
        return TaskFrame.wrap(answers, summary)

    # --- operators across rows (frames/operators.py) ----------------------------------------------

    @_documented
    def filter(self, condition: str, *, state: TemplateSpec | None = None, threshold: float = 0.5,
               name: str = "condition", model: str | None = None, cascade: Cascade | None = None,
               **options: Unpack[RunOptions]) -> OperatorFrame:
        """The rows for which `condition` holds: one decision (a noul question) per distinct row.

        Parameters
        ----------
        condition : str
            The condition in words (``"The customer asks for a refund"``).
        state : str, list of str or dict, optional
            What the model reads per row, as for ``decide`` (default: every column, as a JSON object).
        threshold : float, default 0.5
            A row is kept when the condition's probability reaches it (an error row never is).
        name : str, default "condition"
            The question id: the probability column is ``{name}__noul``.
        model : str, optional
            Decision model ID (default ``local/decide-e5-small``).
        cascade : gwlab.Cascade, optional
            Answer the rows the decision model is sure of and send the rest to the cascade's oracle (as
            for ``decide``); a row is then kept by its answer (``{name}__answer``, with ``{name}__source``).
        {run_options}
        The kept rows (input columns unless ``join=False``, then ``{name}__noul``); ``.answers`` holds
        every row's answer and ``.run`` the operator's summary.
        """
        return _client.run_sync(self.afilter(condition, state=state, threshold=threshold, name=name, model=model,
                                             cascade=cascade, **options), options.get("gateway"))

    async def afilter(self, condition: str, *, state: TemplateSpec | None = None, threshold: float = 0.5,
                      name: str = "condition", model: str | None = None, cascade: Cascade | None = None,
                      **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `filter`."""
        return await operators.filter_rows(self._frame, condition, state, threshold, name, model, dict(options),
                                           cascade)

    @_documented
    def merge(self, right: pd.DataFrame, condition: str, *, left_on: TemplateSpec | None = None,
              right_on: TemplateSpec | None = None, how: Literal["inner", "left"] = "inner",
              model: str | None = None, dry_run: bool = False, blocking: operators.Blocking | None = None,
              **options: Unpack[RunOptions]) -> OperatorFrame | operators.MergePlan:
        """Pair this frame's rows with `right`'s by a condition in words, as pandas' ``merge`` by a key.

        A right frame of at most ``operators.SMALL_RIGHT`` rows is a classification: one choice question
        per distinct left row whose options are the right rows and "none" (one request per left row
        instead of one per pair). A larger one is a noul condition per pair, asked only for each left
        row's ``blocking.candidates`` most similar right rows (TF-IDF, which sends nothing).

        Parameters
        ----------
        right : DataFrame
            The other frame (its index labels are kept in ``right_index``).
        condition : str
            The relation in words (``"The ticket is about this product"``).
        left_on, right_on : str, list of str or dict, optional
            Templates for each side's text (default: every column, as a JSON object).
        how : {"inner", "left"}, default "inner"
            "left" keeps left rows without a match (their right columns missing).
        model : str, optional
            Decision model ID.
        dry_run : bool, default False
            Send nothing: return the ``MergePlan`` (``.requests`` against ``.pairwise``).
        blocking : Blocking, optional
            ``Blocking(candidates=5, threshold=0.5, similarity=None)`` for a large right side.
        {run_options}
        Left rows (on the left's index) with their matched right rows (clashing names get ``_x``/``_y``),
        ``match__p`` (the match's probability) and ``right_index``.
        """
        spec = operators.MergeSpec(condition, left_on, right_on, how, model, blocking or operators.Blocking())
        if dry_run:  # no gateway needed to count
            return operators.plan(self._frame, right, spec, options)
        return _client.run_sync(operators.merge(self._frame, right, spec, dry_run, dict(options)),
                                options.get("gateway"))

    async def amerge(self, right: pd.DataFrame, condition: str, *, left_on: TemplateSpec | None = None,
                     right_on: TemplateSpec | None = None, how: Literal["inner", "left"] = "inner",
                     model: str | None = None, dry_run: bool = False, blocking: operators.Blocking | None = None,
                     **options: Unpack[RunOptions]) -> OperatorFrame | operators.MergePlan:
        """The async twin of `merge`."""
        spec = operators.MergeSpec(condition, left_on, right_on, how, model, blocking or operators.Blocking())
        return await operators.merge(self._frame, right, spec, dry_run, dict(options))

    @_documented
    def topk(self, criterion: str, k: int, *, state: TemplateSpec | None = None, window: int = 2,
             levels: Sequence[str] | None = None, model: str | None = None,
             **options: Unpack[RunOptions]) -> OperatorFrame:
        """The `k` rows that best meet `criterion`, best first.

        Every row gets a score question; the ``2 * window`` rows around the k-th are then
        compared pairwise ("which of the two better meets it", packed as questions of one request) and
        reordered by their expected wins, since scores near the cut are the least sure.

        Parameters
        ----------
        criterion : str
            What "best" means, in words.
        k : int
            Rows returned (1 to the frame's length).
        state : str, list of str or dict, optional
            What the model reads per row (default: every column, as a JSON object).
        window : int, default 2
            Rows on each side of the cut that are compared pairwise (0: scores only).
        levels : list of str, optional
            The score's levels, lowest first (``["a routine question", "needs an answer today", "an
            emergency"]``); default: the criterion "not at all", "somewhat", "very much".
        model : str, optional
            Decision model ID.
        {run_options}
        The k rows with ``score`` (expected level), ``wins`` (compared rows only) and ``rank``;
        ``.run.comparisons`` counts the comparisons.
        """
        coroutine = operators.topk(self._frame, criterion, k, state, window, model, {**options, "levels": levels})
        return _client.run_sync(coroutine, options.get("gateway"))

    async def atopk(self, criterion: str, k: int, *, state: TemplateSpec | None = None, window: int = 2,
                    levels: Sequence[str] | None = None, model: str | None = None,
                    **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `topk`."""
        return await operators.topk(self._frame, criterion, k, state, window, model, {**options, "levels": levels})

    @_documented
    def aggregate(self, instruction: str, by: str | list[str] | None = None, *, text: TemplateSpec | None = None,
                  protocol: Literal["chat", "responses", "messages"] = "chat", model: str | None = None,
                  max_tokens: int = 256, max_input_tokens: int | None = None,
                  **options: Unpack[RunOptions]) -> OperatorFrame:
        """One answer per group (a summary, a count by theme, a list of issues) by map-reduce.

        The rows are packed into chunks that fit the text model's input limit; each chunk is answered,
        and the answers are combined level by level until one remains. Each level is a checkpointed text
        run, so a resumed aggregate pays nothing twice. Nothing is cut: a row too long for a chunk on its
        own fails its group, named.

        Parameters
        ----------
        instruction : str
            What to produce over the rows.
        by : str or list of str, optional
            Group columns: one answer per group (default: one over all rows, labelled "all").
        text : str, list of str or dict, optional
            Each row's text (default: the other columns, as a JSON object).
        protocol : {"chat", "responses", "messages"}, default "chat"
            The text family asked.
        model : str, optional
            Text model ID (default: the family's).
        max_tokens : int, default 256
            Output tokens of each request.
        max_input_tokens : int, optional
            The input limit to pack to (default: the model's ``max_input_tokens`` in GET /models).
        {run_options}
        One row per group: ``answer``, ``rows``, ``requests`` and ``__error``; ``.run.levels``.
        ``join`` does not apply (the rows are groups).
        """
        spec = operators.AggregateSpec(instruction, by=by, text=text, protocol=protocol, model=model,
                                       max_tokens=max_tokens, max_input_tokens=max_input_tokens)
        return _client.run_sync(operators.aggregate(self._frame, spec, dict(options)), options.get("gateway"))

    async def aaggregate(self, instruction: str, by: str | list[str] | None = None, *,
                         text: TemplateSpec | None = None, protocol: Literal["chat", "responses", "messages"] = "chat",
                         model: str | None = None, max_tokens: int = 256, max_input_tokens: int | None = None,
                         **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `aggregate`."""
        spec = operators.AggregateSpec(instruction, by=by, text=text, protocol=protocol, model=model,
                                       max_tokens=max_tokens, max_input_tokens=max_input_tokens)
        return await operators.aggregate(self._frame, spec, dict(options))

    # --- the shared steps -----------------------------------------------------------------------

    def _prompts(self, prompt: TemplateSpec, system: str | None, system_field: str = "system",
                 options: RunOptions | None = None) -> Rows:
        """Per row: the prompt text, or (prompt, system) when a system text is given."""
        columns, blank = self._frame.columns, _blank_rule(options or {})
        prompts = Template.parse(prompt, columns, field="prompt").rows(self._frame, **blank)
        if system is None:
            return prompts
        system_rows = Template.parse(system, columns, field=system_field, literal_ok=True).rows(self._frame, **blank)
        return prompts.zip(system_rows)

    async def _run(self, family: RowRecipe, rows: Rows, options: RunOptions,
                   template: Mapping[str, Any], convert: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
                   derived: GroundingPlan | None = None) -> BatchFrame:
        """Run the rows; `convert` types the answers, and `derived` names the columns it adds that the
        run's record keeps (the grounding: `run_answers` has no source text to align again)."""
        config = RunConfig.of("rows", options)
        if rows.errors and config.errors == "raise":
            position, message = next(iter(sorted(rows.errors.items())))
            label = self._frame.index[position]
            label = tuple(map(json_value, label)) if isinstance(label, tuple) else json_value(label)
            raise InvalidRequest(message.split(":", 1)[0],
                                 f"row {label!r}: {message.split(': ', 1)[-1]} (errors='coerce' makes it an "
                                 "error row)")
        self._check_names(family, config, derived.columns() if derived is not None else ())
        greedy = repeats.deterministic(family.spec) if config.repeats > 1 else None
        if greedy is not None:  # said before the first request, so nothing is paid k times unawares
            warnings.warn(f"repeats={config.repeats} with {greedy}: the model is asked for its one most likely "
                          f"answer, so every repeat gives the same and is sent and paid {config.repeats} times; "
                          "use repeats=1, or sample (temperature > 0) to measure stability", RepeatsWarning,
                          stacklevel=3)
        connection = _client.connection(config.gateway)
        over = await _over_limit(family, rows, connection, config)
        if over is not None and len(over.positions):
            warnings.warn(_over_limit_text(over, self._labels(over.positions)), InputLimitWarning, stacklevel=2)
        checkpoint, owned = open_for_run(config.checkpoint)
        origin = await _client.checkpoint_origin(connection) if checkpoint is not None else connection.origin
        send, retry_delay, phase = connection.send, connection.retry_delay, None
        if config.batch is not None and config.batch is not False:  # provider batch jobs (frames/batch_run.py)
            phase, send, retry_delay, config = await batch_run.prepare(family, Batch(rows), config, connection,
                                                                       checkpoint, origin)
        runner = Runner(family, send, config, retry_delay=retry_delay, checkpoint=checkpoint,
                        description=f"{family.name} {family.model}", gateway=origin)
        try:
            with _client.run_tag(connection, family.name) as run_label:
                result = await _client.stoppable(runner, Batch(rows))
            if phase is not None:
                batch_run.finish(result.summary, phase, send)
            answers = None if result.failure is not None else result.frame(self._frame.index)
            answers = convert(answers) if answers is not None and convert is not None else answers
            kept = derived.record(answers) if derived is not None and answers is not None else None
            records.record_rows(checkpoint, runner, result, records.Described(
                template, self._frame.index, config.prefix, label=run_label, derived=kept))
        finally:
            if owned and checkpoint is not None:
                checkpoint.close()
        if over is not None:
            result.summary.over_limit = {
                "model": over.model, "limit": over.limit, "count": len(over.positions),
                "rows": self._labels(over.positions[:20]), "estimated_tokens": over.tokens[:20].tolist()}
        if result.failure is not None:
            raise result.failure
        long = self._wrap_repeats(result.repeats_frame(self._frame.index), config) if config.repeats > 1 else None
        return BatchFrame.wrap(self._wrap(answers, config), result.summary, long)

    def _labels(self, positions: Any) -> list[Any]:
        """Index labels of row positions, as JSON-safe values (they go into `.attrs`)."""
        labels = self._frame.index[positions]
        return [tuple(map(json_value, label)) if isinstance(label, tuple) else json_value(label) for label in labels]

    def _check_names(self, family: RowRecipe, config: RunConfig, extra: Sequence[str] = ()) -> None:
        """Refuse a column clash before anything is sent, not after the run has been paid for."""
        if not config.join:
            return
        prefix = config.prefix
        names = [*family.columns, *META_COLUMNS, *extra]
        if config.repeats > 1:
            names += [f"{c}__std" for c in family.spread] + ["__repeats"]
            names += [f"{repeats.stem(c)}__agreement" for c in family.decided]
        clash = [f"{prefix}{c}" for c in names if f"{prefix}{c}" in self._frame.columns]
        if clash:
            raise InvalidRequest("prefix", f"the frame already has column {clash[0]!r}; pass prefix='...' "
                                           "or join=False")

    def _wrap_repeats(self, long: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
        """The long repeats frame, named and joined as the run's result is."""
        if config.prefix:
            long.columns = [f"{config.prefix}{c}" for c in long.columns]
        if not config.join:
            return long
        inputs = self._frame.iloc[np.repeat(np.arange(len(self._frame)), config.repeats)]
        inputs.index = long.index
        return pd.concat([inputs, long], axis=1)

    def _wrap(self, answers: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
        if config.prefix:
            answers.columns = [f"{config.prefix}{c}" for c in answers.columns]
        if not config.join:
            return answers
        answers.index = self._frame.index  # the same object: concat aligns nothing, duplicates stay put
        return pd.concat([self._frame, answers], axis=1)


def _column_named(frame: pd.DataFrame, name: str) -> Any:
    """The frame's column whose name reads `name` (templates name columns by their text)."""
    return next(c for c in frame.columns if str(c) == name)


class RepeatsWarning(UserWarning):
    """`repeats=k` on requests that ask for a deterministic answer: k requests paid for one answer."""


class InputLimitWarning(UserWarning):
    """Rows that look longer than the model's documented input limit, found before anything is sent."""


async def _over_limit(family: RowRecipe, rows: Rows, connection: Any, config: RunConfig) -> OverLimit | None:
    """With `pilot=` or `budget=`: the rows over the model's `max_input_tokens` (GET /models), checked
    before spending. None when not asked, or when the gateway lists no limit for the model."""
    if config.pilot is None and config.budget is None:
        return None
    limit = await connection.input_limit(family.model) if connection.input_limit is not None else None
    return over_limit(rows, family.model, limit) if limit else None


def _over_limit_text(over: OverLimit, labels: list[Any]) -> str:
    shown = ", ".join(f"{label!r} (~{tokens} tokens)" for label, tokens in zip(labels[:10], over.tokens[:10],
                                                                                   strict=False))
    more = f" and {len(labels) - 10} more" if len(labels) > 10 else ""
    return (f"{len(over.positions)} rows look longer than {over.model}'s input limit of {over.limit} tokens "
            f"(its max_input_tokens in GET /models; estimated at {BYTES_PER_TOKEN} bytes per token): rows "
            f"{shown}{more}. The gateway will refuse them: shorten or split them before the full run.")

