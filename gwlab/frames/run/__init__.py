"""A run's machinery: the row runner, its outcome, budget, limits, records and config (its store: frames/store)."""
