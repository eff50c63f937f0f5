"""Cascades: the cheap model answers the rows it is sure of, an oracle the rest (spec, oracle, run)."""
