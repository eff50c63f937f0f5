"""The packaged calibration of `local/decide-e5-small`'s noul probabilities.

Written by `python bench/decision_calibration.py --fit`; do not edit by hand (docs/gateway.md).
"""

from __future__ import annotations

from gwlab.local.engines.calibration import PlattMap

NOUL_CALIBRATION: PlattMap | None = PlattMap(
    slope=0.9470478355038939,
    intercept=0.62364883369863,
    temperature=0.02,
    fitted_on="local/data/decision_calibration.json",
    examples=304,
    conditions=38,
    domains=(
        "cars", "civic", "cooking", "education", "finance news", "gardening", "health", "history",
        "jobs", "legal", "movies", "parenting", "personal email", "pets", "product listing",
        "real estate", "restaurants", "science", "software", "sports", "travel", "weather",
    ),
    prior=0.5,
)
