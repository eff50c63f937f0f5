"""Statistics in plain numpy (intervals, metrics, calibration, cascade thresholds), imported by frames as wire is."""
