"""The pandas layer: `df.gw` (accessor.py, its face) and its rooms: run/, cascade/, operators/, dask/, evaluation/."""
