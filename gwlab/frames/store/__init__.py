"""Where a run's answers are kept: the checkpoint stores (SQLite, PostgreSQL), which one opens, and reading ahead."""
