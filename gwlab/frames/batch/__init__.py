"""Provider batch jobs for the text runs: submit and collect (jobs), the journal, the batch phase (run), its pilot."""
