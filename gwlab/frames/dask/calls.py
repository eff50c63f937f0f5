"""What a user calls over a dask DataFrame: `decide` (a cascade too), `chat`, `respond`, `messages`,
`extract`, each a lazy `map_partitions` of partitions.py's run with its meta.

The Dask face's door, as `frames/accessor.py` is pandas': the keywords are read here once (`_setup`) into
a typed `DaskSetup` (the partitions' `RunConfig`, the cluster's `Limits`) and a row spec; nothing below
reads an options dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from gwlab.errors import InvalidRequest
from gwlab.frames import recipes
from gwlab.frames.cascade.spec import Cascade
from gwlab.frames.dask.cascade import cascade_decide
from gwlab.frames.dask.partitions import (
    PARTITION_OPTIONS,
    DaskExtractOptions,
    DaskOptions,
    DaskSetup,
    Limits,
    lazy_run,
)
from gwlab.frames.extract import extract_recipe
from gwlab.frames.run.config import RunConfig
from gwlab.frames.run.limiter import DEFAULT_BURST_SECONDS
from gwlab.frames.specs import DecideSpec, ExtractSpec, TextSpec
from gwlab.wire.families import FAMILIES
from gwlab.wire.schema import Schema

__all__ = ["chat", "decide", "extract", "messages", "respond"]


_SHARED_DOC = """
    gateway : Gateway, AsyncGateway or GatewaySpec
        Where workers send (only its address and key travel to them); ``GatewaySpec(base_url)``
        leaves the key out, and each worker reads ``GWLAB_API_KEY`` from its environment.
    checkpoint : path or URL
        Shared by every worker. ``"postgresql://user@host/db"``: a server every host reaches (with
        claims, so no row is asked twice at once). A path: a SQLite file, one machine only. Required:
        without it a retried task would pay twice.
    requests_per_minute, tokens_per_minute : float, optional
        One limit for the sum of all workers (held by the dask.distributed scheduler).
    max_in_flight : int, optional
        Requests in flight across the whole cluster (needs dask.distributed).
    limiter_name : str, default "default"
        Runs sharing a name share a limit.
    burst : float, default 10
        Seconds of quota the shared bucket may hold.
    concurrency : int, default 8
        Requests in flight per partition being computed.
    errors : {"raise", "coerce"}, default "coerce"
        As in ``df.gw``; "coerce" because one raising partition would fail the whole computation.
    join, prefix, blank
        As in ``df.gw``.
    budget_per_partition : int, optional
        A token budget per partition (a global budget across workers is not offered).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy; its meta is built from the family, so nothing is sent until ``compute()``.
"""


def _documented(function: Any) -> Any:
    function.__doc__ = function.__doc__.replace("    {shared}\n", _SHARED_DOC.lstrip("\n"))
    return function


TemplateSpec = str | Sequence[str] | Mapping[str, str]


@_documented
def decide(ddf: Any, state: TemplateSpec, questions: Mapping[str, Any], *, model: str | None = None,
           cascade: Cascade | None = None, **options: Unpack[DaskOptions]) -> Any:
    """Decisions for every row of a dask DataFrame, lazily; ``df.gw.decide`` per partition.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    state, questions, model
        As in ``df.gw.decide``.
    cascade : gwlab.Cascade, optional
        As in ``df.gw.decide``: the same columns and threshold. The proxy's run and the oracle's sample
        are computed now (to set the threshold); the rest stays lazy, and the frame's ``.cascade``
        holds the summary known now (see ``gwlab.frames.dask.cascade`` and docs/guide/cascades.md).
    {shared}
    """
    if cascade is not None:
        if not isinstance(cascade, Cascade):
            raise InvalidRequest("cascade", f"a gwlab.Cascade; got {type(cascade).__name__}")
        if options.get("checkpoint") is None:
            raise InvalidRequest("checkpoint", "a cascade on Dask reads the proxy's answers twice (to set the "
                                               "threshold, then in each partition): pass a path or a "
                                               "postgresql:// URL")
        return cascade_decide(ddf, DecideSpec(state, questions, model), cascade, _setup(options))
    family = recipes.decisions_recipe_for(questions, model)
    return lazy_run(ddf, DecideSpec(state, questions, model), family, _setup(options))


@_documented
def chat(ddf: Any, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
         max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
         **options: Unpack[DaskOptions]) -> Any:
    """A chat completion for every row of a dask DataFrame, lazily; ``df.gw.chat`` per partition.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    prompt, system, model, max_tokens, params
        As in ``df.gw.chat``.
    {shared}
    """
    return _text(ddf, "chat", prompt, system, model, max_tokens, params, options)


@_documented
def respond(ddf: Any, prompt: TemplateSpec, *, instructions: str | None = None, model: str | None = None,
            max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
            **options: Unpack[DaskOptions]) -> Any:
    """A responses-protocol call for every row of a dask DataFrame, lazily; ``df.gw.respond`` per partition.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    prompt, instructions, model, max_tokens, params
        As in ``df.gw.respond``.
    {shared}
    """
    return _text(ddf, "respond", prompt, instructions, model, max_tokens, params, options)


@_documented
def messages(ddf: Any, prompt: TemplateSpec, *, system: str | None = None, model: str | None = None,
             max_tokens: int = 256, params: Mapping[str, Any] | None = None,
             **options: Unpack[DaskOptions]) -> Any:
    """A messages-protocol call for every row of a dask DataFrame, lazily; ``df.gw.messages`` per partition.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    prompt, system, model, max_tokens, params
        As in ``df.gw.messages``.
    {shared}
    """
    return _text(ddf, "messages", prompt, system, model, max_tokens, params, options)




@_documented
def extract(ddf: Any, prompt: TemplateSpec, schema: Any, *, protocol: str = "chat", system: str | None = None,
            model: str | None = None, max_tokens: int | None = None, params: Mapping[str, Any] | None = None,
            **options: Unpack[DaskExtractOptions]) -> Any:
    """A schema's fields for every row of a dask DataFrame, lazily; ``df.gw.extract`` per partition.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The rows.
    prompt, schema, protocol, system, model, max_tokens, params, max_reasks, structured
        As in ``df.gw.extract``; the meta has the fields' typed columns.
    {shared}
    """
    own = {name: options[name] for name in _EXTRACT_OWN if name in options}  # type: ignore[literal-required]  # keys of the TypedDict
    run = {name: value for name, value in options.items() if name not in _EXTRACT_OWN}
    parsed = Schema.of(schema)  # normalised once: workers get the schema, not the caller's classes to rebuild
    # grounding is not on Dask yet: its meta has no grounding columns (docs/pandas.md)
    spec = ExtractSpec(prompt, parsed, protocol, system, model, max_tokens, params, grounding="off", **own)
    family, _ = extract_recipe(protocol, parsed, model, max_tokens, params, max_reasks=spec.max_reasks,
                               structured=spec.structured)
    return lazy_run(ddf, spec, family, _setup(run), schema=parsed)


_EXTRACT_OWN = ("max_reasks", "structured")  # DaskExtractOptions beyond DaskOptions


def _text(ddf: Any, method: str, prompt: TemplateSpec, system: str | None, model: str | None,
          max_tokens: int | None, params: Mapping[str, Any] | None, options: Mapping[str, Any]) -> Any:
    """What chat, respond and messages share: the family (it gives the meta) and the partition's spec."""
    protocol = next(row for row in FAMILIES.values() if row.frame_method == method)
    model = model or protocol.default_model
    family = recipes.text_recipe(protocol.name, model, max_tokens, params)
    spec = TextSpec(protocol.name, prompt, system, model, max_tokens, params)
    return lazy_run(ddf, spec, family, _setup(options))


def _setup(options: Mapping[str, Any]) -> DaskSetup:
    """The door: the keywords checked once (an unknown one is a TypeError naming it) and typed."""
    unknown = set(options) - set(DaskOptions.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    shared = {name: options[name] for name in PARTITION_OPTIONS if name in options}
    config = RunConfig.of("dask", {**shared, "budget": options.get("budget_per_partition")})
    limits = Limits(options.get("requests_per_minute"), options.get("tokens_per_minute"),
                    options.get("max_in_flight"), options.get("limiter_name", "default"),
                    options.get("burst", DEFAULT_BURST_SECONDS))
    return DaskSetup(options["gateway"], options["checkpoint"], limits, config)
