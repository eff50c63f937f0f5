"""Background work: the task worker and its preview renderers, the batch worker and its per-line runs."""
