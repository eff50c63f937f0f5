"""`df.gw`: gateway calls over the rows of a DataFrame. Returns a new frame; never edits this one.

The face and its docs only: each async method builds its spec and hands it, with the run's options, to
the step that does the work (steps.py for rows and tasks, the cascade, the operators); its sync twin
runs it to completion (`_sync`), with no logic of its own (tests/frames/test_accessor_face.py). The
accessor holds the frame and nothing else.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Literal, TypeVar, Unpack

import pandas as pd

from gwlab.errors import InputLimitWarning, InvalidRequest, RepeatsWarning
from gwlab.frames import _client, steps
from gwlab.frames.cascade.run import run_cascade
from gwlab.frames.cascade.spec import Cascade
from gwlab.frames.operators.aggregate import AggregateSpec, aggregate
from gwlab.frames.operators.blocking import Blocking
from gwlab.frames.operators.filter import FilterSpec, filter_rows
from gwlab.frames.operators.merge import MergePlan, MergeSpec, merge, plan
from gwlab.frames.operators.shared import OperatorFrame
from gwlab.frames.operators.topk import TopkSpec, topk
from gwlab.frames.run.config import (
    EXTRACT_OPTIONS_DOC,
    RUN_OPTIONS_DOC,
    ExtractOptions,
    RunConfig,
    RunOptions,
    TaskOptions,
)
from gwlab.frames.run.result import BatchFrame
from gwlab.frames.specs import EXTRACT_OWN, DecideSpec, ExtractSpec, TextSpec
from gwlab.frames.steps import TemplateSpec
from gwlab.frames.task_batch import TaskFrame
from gwlab.wire import images, videos
from gwlab.wire.jobs.tasks import TaskFamily, build_submit
from gwlab.wire.models import DEFAULT_MODELS  # written once, in wire
from gwlab.wire.schema import Schema

__all__ = ["ExtractOptions", "GatewayAccessor", "InputLimitWarning", "RepeatsWarning", "RunOptions", "TaskOptions"]

T = TypeVar("T")


def _sync(coroutine: Coroutine[Any, Any, T], options: Mapping[str, Any], *, sends: bool = True) -> T:
    """A sync face's whole body: its async twin, run on the gateway's loop thread (a call that sends
    nothing, a merge's dry run, on the frames loop, so no gateway is started for it)."""
    return _client.run_sync(coroutine, options.get("gateway") if sends else _client.NO_GATEWAY)


def _documented(method: Any) -> Any:
    """Fill the shared runner options into a method's numpydoc (Jupyter's `?` shows them)."""
    lines = RUN_OPTIONS_DOC.strip("\n").split("\n")
    options = "\n".join(("    " + line if line.strip() else "") for line in lines)
    method.__doc__ = method.__doc__.replace("        {run_options}\n", options + "\n")
    method.__doc__ = method.__doc__.replace("        {extract_options}\n", EXTRACT_OPTIONS_DOC.lstrip("\n"))
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
        return _sync(self.adecide(state, questions, model=model, cascade=cascade, **options), options)

    async def adecide(self, state: TemplateSpec, questions: Mapping[str, Any], *, model: str | None = None,
                      cascade: Cascade | None = None, **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `decide`: await it in a running loop (with an AsyncGateway)."""
        spec, config = DecideSpec(state, questions, model), RunConfig.of("rows", options)
        if cascade is not None:
            return await run_cascade(self._frame, spec, cascade, config)
        return await spec.run(self._frame, config)

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
        return _sync(self.achat(prompt, system=system, model=model, max_tokens=max_tokens, params=params,
                               **options), options)

    async def achat(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
                    max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
                    **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `chat`: await it in a running loop (with an AsyncGateway)."""
        spec = TextSpec("chat", prompt, system, model, max_tokens, params)
        return await spec.run(self._frame, RunConfig.of("rows", options))

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
        return _sync(self.arespond(prompt, instructions=instructions, model=model, max_tokens=max_tokens,
                                  params=params, **options), options)

    async def arespond(self, prompt: TemplateSpec, *, instructions: str | None = None,
                       model: str | None = None, max_tokens: int | None = None,
                       params: Mapping[str, Any] | None = None,
                       **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `respond`: await it in a running loop (with an AsyncGateway)."""
        spec = TextSpec("responses", prompt, instructions, model, max_tokens, params)
        return await spec.run(self._frame, RunConfig.of("rows", options))

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
        return _sync(self.amessages(prompt, system=system, model=model, max_tokens=max_tokens, params=params,
                                   **options), options)

    async def amessages(self, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
                        max_tokens: int = 256, params: Mapping[str, Any] | None = None,
                        **options: Unpack[RunOptions]) -> BatchFrame:
        """The async twin of `messages`: await it in a running loop (with an AsyncGateway)."""
        spec = TextSpec("messages", prompt, system, model, max_tokens, params)
        return await spec.run(self._frame, RunConfig.of("rows", options))

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
        {extract_options}
        {run_options}
        Columns: one per top-level field, named as the field, in pandas' nullable dtypes (``Int64``,
        ``Float64``, ``boolean``, ``string``, ``category`` with the allowed values as categories,
        ``datetime64[ns]``; lists and nested objects one ``object`` column of lists/dicts), then
        ``__raw`` (the answer as written) and ``__reasks``. A row still invalid after its re-asks has
        status ``error``, its fields missing and the validation error in ``__error``. With grounding,
        its columns (above), then ``__notes``.

        Examples
        --------
        >>> tickets.gw.extract("{text}", {"product": str, "order": int | None}, max_tokens=64)  # doctest: +SKIP
        """
        return _sync(self.aextract(prompt, schema, protocol=protocol, system=system, model=model,
                                  max_tokens=max_tokens, params=params, **options), options)

    async def aextract(self, prompt: TemplateSpec, schema: Any, *, protocol: str = "chat",
                       system: str | None = None, model: str | None = None, max_tokens: int | None = None,
                       params: Mapping[str, Any] | None = None,
                       **options: Unpack[ExtractOptions]) -> BatchFrame:
        """The async twin of `extract`: await it in a running loop (with an AsyncGateway)."""
        own, config = RunConfig.split("rows", options, EXTRACT_OWN)
        spec = ExtractSpec(prompt, Schema.of(schema), protocol, system, model, max_tokens, params, **own)
        return await spec.run(self._frame, config)

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
        return _sync(self.avideos(prompt, model=model, seconds=seconds, size=size, params=params, **options), options)

    async def avideos(self, prompt: TemplateSpec, *, model: str | None = None, seconds: str | int | None = None,
                      size: str | None = None, params: Mapping[str, Any] | None = None,
                      **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `videos`: await it in a running loop (with an AsyncGateway)."""
        model = model or DEFAULT_MODELS["videos"]

        def build(text: str) -> dict[str, Any]:
            return videos.build_create(text, model, seconds, size, **dict(params or {}))

        return await steps.run_tasks(self._frame, videos.VIDEOS, model, prompt, build, RunConfig.of("tasks", options))

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
        return _sync(self.aimages(prompt, model=model, size=size, params=params, **options), options)

    async def aimages(self, prompt: TemplateSpec, *, model: str | None = None, size: str | None = None,
                      params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `images`: await it in a running loop (with an AsyncGateway)."""
        model = model or DEFAULT_MODELS["images"]

        def build(text: str) -> dict[str, Any]:
            return images.build_create(text, model, size, **dict(params or {}))

        return await steps.run_tasks(self._frame, images.IMAGES, model, prompt, build, RunConfig.of("tasks", options))

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
            A limit on submissions; a 429 pauses every submission.
        limiter : Limiter, optional
            A limiter to share between runs or processes (``SharedTokenBucket``), instead of
            ``requests_per_minute``.
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
        return _sync(self.atasks(family, prompt, model=model, params=params, **options), options)

    async def atasks(self, family: TaskFamily, prompt: TemplateSpec, *, model: str,
                     params: Mapping[str, Any] | None = None, **options: Unpack[TaskOptions]) -> TaskFrame:
        """The async twin of `tasks`: await it in a running loop (with an AsyncGateway)."""
        if not isinstance(family, TaskFamily):
            raise InvalidRequest("family", f"a gwlab.wire.jobs.tasks.TaskFamily; got {type(family).__name__}")

        def build(text: str) -> dict[str, Any]:
            return build_submit(family, text, model, params)

        return await steps.run_tasks(self._frame, family, model, prompt, build, RunConfig.of("tasks", options))

    # --- operators across rows (frames/operators/) ----------------------------------------------

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
        return _sync(self.afilter(condition, state=state, threshold=threshold, name=name, model=model,
                                  cascade=cascade, **options), options)

    async def afilter(self, condition: str, *, state: TemplateSpec | None = None, threshold: float = 0.5,
                      name: str = "condition", model: str | None = None, cascade: Cascade | None = None,
                      **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `filter`."""
        spec = FilterSpec(condition, state, threshold, name, model, cascade)
        return await filter_rows(self._frame, spec, RunConfig.of("rows", options))

    @_documented
    def merge(self, right: pd.DataFrame, condition: str, *, left_on: TemplateSpec | None = None,
              right_on: TemplateSpec | None = None, how: Literal["inner", "left"] = "inner",
              model: str | None = None, dry_run: bool = False, blocking: Blocking | None = None,
              **options: Unpack[RunOptions]) -> OperatorFrame | MergePlan:
        """Pair this frame's rows with `right`'s by a condition in words, as pandas' ``merge`` by a key.

        A right frame of at most ``gwlab.frames.operators.merge.SMALL_RIGHT`` rows is a classification: one
        choice question per distinct left row whose options are the right rows and "none" (one request per left row
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
        return _sync(self.amerge(right, condition, left_on=left_on, right_on=right_on, how=how, model=model,
                                 dry_run=dry_run, blocking=blocking, **options), options, sends=not dry_run)

    async def amerge(self, right: pd.DataFrame, condition: str, *, left_on: TemplateSpec | None = None,
                     right_on: TemplateSpec | None = None, how: Literal["inner", "left"] = "inner",
                     model: str | None = None, dry_run: bool = False, blocking: Blocking | None = None,
                     **options: Unpack[RunOptions]) -> OperatorFrame | MergePlan:
        """The async twin of `merge`."""
        spec = MergeSpec(condition, left_on, right_on, how, model, blocking or Blocking())
        config = RunConfig.of("rows", options)
        if dry_run:  # no gateway needed to count
            return plan(self._frame, right, spec, config)
        return await merge(self._frame, right, spec, config)

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
        return _sync(self.atopk(criterion, k, state=state, window=window, levels=levels, model=model, **options),
                     options)

    async def atopk(self, criterion: str, k: int, *, state: TemplateSpec | None = None, window: int = 2,
                    levels: Sequence[str] | None = None, model: str | None = None,
                    **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `topk`."""
        spec = TopkSpec(criterion, k, state, window, levels, model)
        return await topk(self._frame, spec, RunConfig.of("rows", options))

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
        return _sync(self.aaggregate(instruction, by, text=text, protocol=protocol, model=model, max_tokens=max_tokens,
                                     max_input_tokens=max_input_tokens, **options), options)

    async def aaggregate(self, instruction: str, by: str | list[str] | None = None, *,
                         text: TemplateSpec | None = None, protocol: Literal["chat", "responses", "messages"] = "chat",
                         model: str | None = None, max_tokens: int = 256, max_input_tokens: int | None = None,
                         **options: Unpack[RunOptions]) -> OperatorFrame:
        """The async twin of `aggregate`."""
        spec = AggregateSpec(instruction, by=by, text=text, protocol=protocol, model=model, max_tokens=max_tokens,
                             max_input_tokens=max_input_tokens)
        return await aggregate(self._frame, spec, RunConfig.of("rows", options))
