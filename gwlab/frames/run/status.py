"""What became of a row, one vocabulary for every run: the `__status` of `df.gw` rows and the `status` a
task batch gives a row that has no task of its own. Stored as small integers in the runner's arrays,
shown as the member's lower-case name."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = ["LABELS", "RowStatus"]


class RowStatus(IntEnum):
    NOT_RUN = 0  # never sent: a budget, a pilot or a stop left it out
    SENT = 1  # answered by a request of this run
    CACHED = 2  # answered from the checkpoint: nothing paid again
    ERROR = 3  # failed: bad input, or the request failed
    DUPLICATE = 4  # the same request as an earlier row of this run, answered once (sent now or cached)
    IN_DOUBT = 5  # a task submission whose answer was lost: looked up, never resent blind

    @property
    def label(self) -> str:
        return self.name.lower()


LABELS = np.array([status.label for status in RowStatus], dtype=object)  # indexed by the integer
