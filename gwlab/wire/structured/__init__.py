"""Structured output: the forms a family asks for JSON in (`forms`), and the one re-ask driver (`driver`)."""
