"""Judging answers: evaluation against labels, comparison of runs, field scores, repeats, calibration."""
