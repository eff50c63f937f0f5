"""Operators across rows (`df.gw.filter`, `merge`, `topk`, `aggregate`), each built on the row runner."""
