"""What a user calls over a dask DataFrame: `decide` (a cascade too), `chat`, `respond`, `messages`,
`extract`, each a lazy `map_partitions` of partitions.py's run with its meta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from gwlab.frames import recipes
from gwlab.frames.cascade.spec import Cascade
from gwlab.frames.dask.cascade import cascade_decide
from gwlab.frames.dask.partitions import (
    DaskExtractOptions,
    DaskOptions,
    lazy_run,
)
from gwlab.frames.extract import DEFAULT_MAX_REASKS, Structured, extract_recipe
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
        return cascade_decide(ddf, (state, questions, model), cascade, options)
    family = recipes.decisions_recipe_for(questions, model)
    return lazy_run(ddf, "decide", family, (state, questions), {"model": model}, options)


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
    return _text(ddf, "chat", prompt, {"system": system}, model, max_tokens, params, options)


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
    return _text(ddf, "respond", prompt, {"instructions": instructions}, model, max_tokens, params, options)


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
    return _text(ddf, "messages", prompt, {"system": system}, model, max_tokens, params, options)




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
    max_reasks = options.pop("max_reasks", DEFAULT_MAX_REASKS)  # (the rest: DaskOptions)
    structured: Structured = options.pop("structured", "auto")
    parsed = Schema.of(schema)  # normalised once: workers get the schema, not the caller's classes to rebuild
    family, _ = extract_recipe(protocol, parsed, model, max_tokens, params, max_reasks=max_reasks,
                               structured=structured)
    kwargs = {"protocol": protocol, "system": system, "model": model, "max_tokens": max_tokens, "params": params,
              "max_reasks": max_reasks, "structured": structured,
              "grounding": "off"}  # not on Dask yet: its meta has no grounding columns (docs/pandas.md)
    return lazy_run(ddf, "extract", family, (prompt, parsed), kwargs, options, schema=parsed)


def _text(ddf: Any, method: str, prompt: TemplateSpec, lead: Mapping[str, Any], model: str | None,
          max_tokens: int | None, params: Mapping[str, Any] | None, options: DaskOptions) -> Any:
    """What chat, respond and messages share: the family (it gives the meta) and the partition's arguments."""
    protocol = next(row for row in FAMILIES.values() if row.frame_method == method)
    model = model or protocol.default_model
    family = recipes.text_recipe(protocol.name, model, max_tokens, params)
    kwargs = {**lead, "model": model, "max_tokens": max_tokens, "params": params}
    return lazy_run(ddf, method, family, (prompt,), kwargs, options)
