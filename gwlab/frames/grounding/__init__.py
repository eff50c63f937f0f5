"""Extraction grounding: each extracted value aligned with its source text (columns) and shown highlighted (view)."""
