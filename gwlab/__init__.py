"""gwlab: a notebook toolkit for a multi-protocol AI model gateway.

    import gwlab
    gw = gwlab.connect()     # GWLAB_BASE_URL + GWLAB_API_KEY, else the embedded local gateway
    gw.models(); gw.chat("Hello", model=...); gw.usage

Importing gwlab registers `df.gw` (so pandas loads) but stays light otherwise: the embedded gateway,
its models, the widgets and jsonschema load when first used.
"""

from __future__ import annotations

from gwlab import errors
from gwlab.client.dialect import Dialect
from gwlab.client.gateway import AsyncGateway, Gateway, connect
from gwlab.client.ledger import run
from gwlab.errors import *  # noqa: F403  (so `except gwlab.GatewayError` catches everything of ours)

__version__ = "0.1.0"

__all__ = ["AsyncGateway", "Dialect", "Gateway", "connect", "errors", "evaluate", "run", *errors.__all__]

from gwlab.frames import accessor as _accessor  # noqa: F401  (importing registers df.gw)
from gwlab.frames.evaluate import evaluate


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext gwlab`: the `%gw` / `%%gw` magics (gwlab/magics.py)."""
    from gwlab.magics import load_ipython_extension as load

    load(ipython)  # type: ignore[arg-type]
