"""A griffe extension for the API reference: the `df.gw` methods as Python shows them.

`gwlab.frames.accessor` fills its shared runner options into each method's numpydoc at import time
(`_documented`, so that Jupyter's `?` shows them), and the methods take those options as
`**options: Unpack[RunOptions]`. Griffe reads source, where a `{run_options}` placeholder stands in
the docstring and a bare `**options` in the signature. This copies the filled docstrings over and
spells the options out as keyword-only parameters, so the reference, the signature and `?` agree.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from typing import Any

import griffe

ACCESSOR = "frames.accessor.GatewayAccessor"


class RunOptions(griffe.Extension):
    """Runtime docstrings for the accessor's methods, and every `**options: Unpack[T]` spelled out as T's
    keywords (df.gw's run options, the client's settings, evaluate's settings, a call's options)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "gwlab":
            return
        from gwlab.frames.accessor import GatewayAccessor

        for name, member in pkg.get_member(ACCESSOR).members.items():
            runtime = getattr(GatewayAccessor, name, None)
            if runtime is not None and isinstance(member, griffe.Function) and member.docstring is not None \
                    and "{run_options}" in member.docstring.value:
                member.docstring.value = inspect.cleandoc(runtime.__doc__ or "")
        for function in _functions(pkg):
            _spell_out(function)


def _functions(obj: griffe.Object) -> Iterator[griffe.Function]:
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Function):
            yield member
        elif isinstance(member, griffe.Module | griffe.Class):
            yield from _functions(member)


def _spell_out(function: griffe.Function) -> None:
    """`**options: Unpack[T]` -> T's keys as keyword-only parameters, T read from the function's module."""
    spread = [p for p in function.parameters if p.kind is griffe.ParameterKind.var_keyword
              and "Unpack[" in str(p.annotation)]
    if not spread:
        return
    found = re.search(r"Unpack\[(\w+)\]", str(spread[0].annotation))
    typed = getattr(importlib.import_module(function.module.path), found.group(1), None) if found else None
    if typed is None:
        return
    kept = [p for p in function.parameters if p is not spread[0]]
    options = [griffe.Parameter(key, annotation=str(annotation), kind=griffe.ParameterKind.keyword_only, default="...")
               for key, annotation in typed.__annotations__.items()]
    function.parameters = griffe.Parameters(*kept, *options)
