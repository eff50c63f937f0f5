"""Operators across rows (`df.gw.filter`, `merge`, `topk`, `aggregate`), each built on the row runner."""

from gwlab.errors import FilterWarning  # documented here first (docs/guide/operators.md); the class is gwlab's

__all__ = ["FilterWarning"]
