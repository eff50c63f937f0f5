"""A run's machinery: the row runner, its outcome, budget, limits, checkpoint, records and config."""
