"""A griffe extension for the API reference: the `df.gw` methods as Python shows them.

`gwlab.frames.accessor` fills its shared runner options into each method's numpydoc at import time
(`_documented`, so that Jupyter's `?` shows them), and the methods take those options as
`**options: Unpack[RunOptions]`. Griffe reads source, where a `{run_options}` placeholder stands in
the docstring and a bare `**options` in the signature. This copies the filled docstrings over and
spells the options out as keyword-only parameters, so the reference, the signature and `?` agree.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

ACCESSOR = "frames.accessor.GatewayAccessor"


class RunOptions(griffe.Extension):
    """Runtime docstrings and the RunOptions keywords for the accessor's methods."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "gwlab":
            return
        from gwlab.frames.accessor import GatewayAccessor, RunOptions, TaskOptions

        spreads = {"RunOptions": RunOptions, "TaskOptions": TaskOptions}  # the task batches take their own

        for name, member in pkg.get_member(ACCESSOR).members.items():
            runtime = getattr(GatewayAccessor, name, None)
            if runtime is None or not isinstance(member, griffe.Function):
                continue
            if member.docstring is not None and "{run_options}" in member.docstring.value:
                member.docstring.value = inspect.cleandoc(runtime.__doc__ or "")
            spread = [p for p in member.parameters if p.kind is griffe.ParameterKind.var_keyword
                      and any(name in str(p.annotation) for name in spreads)]
            if spread:
                Options = next(t for name, t in spreads.items() if name in str(spread[0].annotation))
                kept = [p for p in member.parameters if p is not spread[0]]
                options = [griffe.Parameter(key, annotation=str(annotation), kind=griffe.ParameterKind.keyword_only,
                                            default="...")
                           for key, annotation in Options.__annotations__.items()]
                member.parameters = griffe.Parameters(*kept, *options)
