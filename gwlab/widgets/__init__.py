"""Notebook consoles: one anywidget per file, its front end in the `.js` beside it.

    from gwlab.widgets import StreamConsole, RealtimeConsole, DecisionExplorer, UsageDashboard, Labeller

Each console returns at once and works as tasks; the gateway key stays in the kernel (no trait, no
message to the browser ever holds it). Names load on first use, so importing one console does not
import the others' dependencies (matplotlib, for the dashboard).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gwlab.widgets.decision_explorer import DecisionExplorer
    from gwlab.widgets.labeller import Labeller
    from gwlab.widgets.realtime_console import RealtimeConsole
    from gwlab.widgets.stream_console import StreamConsole
    from gwlab.widgets.usage_dashboard import UsageDashboard

__all__ = ["DecisionExplorer", "Labeller", "RealtimeConsole", "StreamConsole", "UsageDashboard"]

_MODULES = {
    "StreamConsole": "gwlab.widgets.stream_console",
    "RealtimeConsole": "gwlab.widgets.realtime_console",
    "DecisionExplorer": "gwlab.widgets.decision_explorer",
    "UsageDashboard": "gwlab.widgets.usage_dashboard",
    "Labeller": "gwlab.widgets.labeller",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'gwlab.widgets' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
