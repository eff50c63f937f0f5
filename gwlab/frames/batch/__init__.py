"""Provider batch jobs for the text runs: submit and collect (jobs), the journal, the accessor's batch phase (run)."""
