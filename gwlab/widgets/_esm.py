"""A widget's front-end module: the shared DOM helpers (dom.js), then the widget's own file.

anywidget takes one ES module per widget and the notebook front end cannot import a sibling file, so
what the consoles share is prepended here rather than copied into each of them.
"""

from __future__ import annotations

from pathlib import Path

_SHARED = Path(__file__).with_name("dom.js")


def esm_of(module_file: str) -> str:
    """The ES module of the widget defined in `module_file` (its `.js` twin, after dom.js)."""
    return _SHARED.read_text(encoding="utf-8") + "\n" + Path(module_file).with_suffix(".js").read_text(encoding="utf-8")
