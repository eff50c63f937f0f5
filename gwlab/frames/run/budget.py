"""What a run may spend: the `Budget` ceiling, and the bookkeeping that holds estimates in flight.

A request is admitted only if what is already billed, plus the estimates held by requests in flight,
plus its own estimate, stays within the budget; its real count replaces its estimate when it settles.

`over_limit` finds, before anything is sent, the rows whose input looks longer than the model's
`max_input_tokens` (GET /models), so a pilot or a budgeted run names them instead of paying to learn it.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gwlab.errors import InvalidRequest
from gwlab.frames.recipes import RowRecipe
from gwlab.frames.run.parts import OverLimitReport
from gwlab.frames.run.usage import PriceTable
from gwlab.frames.templates import Rows

__all__ = ["BYTES_PER_TOKEN", "Budget", "OverLimit", "OverLimitReport", "Spend", "over_limit"]

# Input tokens of a row are guessed as its UTF-8 bytes / 4. bench/long_inputs.py prints 3.34 bytes per
# E5 token over the labelled set's short texts (4.35 for a long English text: 1,000 characters, 230
# tokens) and 4.21 per Gemma token: a guess within about a quarter either way, so a row far over the
# limit is named surely and one near it may be misjudged; the gateway's 400 is the final word.
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Budget:
    """A ceiling on what one run may spend: billed tokens, dollars (with `prices`), or both."""

    tokens: int | None = None
    cost: float | None = None
    prices: PriceTable | Mapping[str, Any] | None = None

    @classmethod
    def of(cls, value: int | float | Budget | None, prices: Any = None) -> Budget | None:
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest("budget", f"a whole number of tokens, or Budget(cost=..., prices=...); "
                                           f"got {value!r}")
        return cls(tokens=value, prices=prices)


class Spend:
    """Budget bookkeeping: billed so far plus reservations of requests in flight."""

    def __init__(self, budget: Budget | None, prices: PriceTable, recipe: RowRecipe) -> None:
        self.budget, self.prices, self.recipe = budget, prices, recipe
        self.tokens = 0.0
        self.cost = 0.0
        self.held_tokens = 0.0
        self.held_cost = 0.0
        self.in_flight = 0
        self.changed = asyncio.Condition()
        # the model's price, looked up once (the table matches globs) and applied to every request
        self._table = PriceTable({recipe.model: price}) if (price := prices.price(recipe.model)) else PriceTable()

    def _price(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed = tokens_in + (tokens_out if self.recipe.charges_output else 0)
        cost = self._table.cost(self.recipe.model, self.recipe.endpoint, tokens_in, tokens_out)
        return billed, cost

    def fits(self, tokens_in: float, tokens_out: float) -> bool:
        if self.budget is None:
            return True
        billed, cost = self._price(tokens_in, tokens_out)
        if self.budget.tokens is not None and self.tokens + self.held_tokens + billed > self.budget.tokens:
            return False
        if self.budget.cost is not None:
            if math.isnan(cost):
                raise InvalidRequest("budget", f"no price for model {self.recipe.model!r}: a cost budget "
                                               "needs prices=")
            if self.cost + self.held_cost + cost > self.budget.cost:
                return False
        return True

    def hold(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed, cost = self._price(tokens_in, tokens_out)
        self.held_tokens += billed
        self.held_cost += 0.0 if math.isnan(cost) else cost
        self.in_flight += 1
        return billed, 0.0 if math.isnan(cost) else cost

    async def settle(self, held: tuple[float, float], tokens_in: float, tokens_out: float) -> None:
        self.held_tokens -= held[0]
        self.held_cost -= held[1]
        self.in_flight -= 1
        billed, cost = self._price(tokens_in, tokens_out)
        self.tokens += billed
        self.cost += cost
        if self.budget is not None:  # only a budget makes requests wait for others to settle
            async with self.changed:
                self.changed.notify_all()


@dataclass(frozen=True)
class OverLimit:
    """Rows whose input looks longer than the model's documented input limit."""

    model: str
    limit: int  # the model's `max_input_tokens`
    positions: np.ndarray  # row positions in the frame
    tokens: np.ndarray  # each one's estimated input tokens

    def report(self, labels: list[Any]) -> OverLimitReport:
        """`.run.over_limit`: the count, and the first 20 rows by `labels` (theirs, in order) with their estimates."""
        return OverLimitReport(self.model, self.limit, len(self.positions), labels[:20], self.tokens[:20].tolist())


def input_text(value: Any) -> str:
    """The text a row sends as its input: the state or prompt; a pair (prompt, system) is both; a JSON
    state is its JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return "\n".join(input_text(v) for v in value if v is not None)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def over_limit(rows: Rows, model: str, limit: int) -> OverLimit:
    """The rows whose input's estimated tokens (UTF-8 bytes / BYTES_PER_TOKEN) pass `limit`; each
    distinct value is rendered once."""
    estimates = np.zeros(len(rows), dtype=np.int64)
    for job in range(len(rows)):
        try:
            text = input_text(rows.value(job))
        except (InvalidRequest, ValueError, TypeError):
            continue  # a row that cannot be rendered fails as a row anyway
        estimates[job] = math.ceil(len(text.encode()) / BYTES_PER_TOKEN)
    over_jobs = np.flatnonzero(estimates > limit)
    positions = np.flatnonzero(np.isin(rows.codes, over_jobs))
    return OverLimit(model, limit, positions, estimates[rows.codes[positions]])
