"""The embedded local gateway: the spec's API on loopback, served by real local models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gwlab.local.server import LocalGateway

__all__ = ["LocalGateway", "start"]


def start(db_path: str | None = None, **options: Any) -> LocalGateway:
    """Start the gateway on a free loopback port in a background thread; returns `.base_url`, `.api_key`."""
    from gwlab.local.server import start as _start  # server deps load only when a gateway is wanted

    return _start(db_path, **options)
